"""Engram: long-term memory for AI agents."""
