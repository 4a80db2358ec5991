"""Engram's memory as an MCP server (the `mcp` SDK's MCPServer): tools to list agents, read and edit core memory,
insert and search archival memory, search the conversation history and chat; a resource template for the blocks.

Two transports, one set of tools (server.py) over the same services as the HTTP routes:
- streamable HTTP at `/mcp` on the service (http.McpEndpoint): every request is authenticated like any other route,
  so keys and tenants are the API's; stateless (no MCP session kept between requests), so a request may reach any
  replica and a session id cannot be replayed with another tenant's key;
- stdio (`engram mcp`, stdio.stdio_mcp_server): one local process acting for the default tenant, or for a key's
  tenant."""
