"""Agents in and out of Engram: the versioned export document, export, atomic import, and Letta `.af` files."""
