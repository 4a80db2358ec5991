"""Engram: long-term memory for AI agents."""

from importlib.metadata import version

__version__ = version("engram")  # from pyproject.toml, the one place the version is written
