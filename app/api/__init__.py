"""The HTTP layer: one router module per domain, and the request dependencies they share. Routers call services
(agents, memory, chat, auth), never repositories; the layering is checked by import-linter (pyproject.toml)."""
