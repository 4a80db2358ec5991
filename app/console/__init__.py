"""The admin console's static files (HTML shell, one stylesheet, vanilla ES modules), shipped as package data and
served at /console by app/api/console.py."""

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
