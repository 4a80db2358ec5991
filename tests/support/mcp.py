"""Driving Engram's MCP server with the `mcp` SDK's own client, over streamable HTTP through the in-process app."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

# Without API keys the service answers /mcp only for a loopback Host (DNS rebinding); TestClient's is "testserver".
MCP_URL = "http://localhost/mcp"


class InProcess(httpx2.AsyncBaseTransport):
    """The SDK's HTTP client through the app's TestClient (synchronous, so in a thread): the same app, lifespan and
    middleware as a served request; a 500 fails the test (CheckedClient)."""

    def __init__(self, client: TestClient):
        self.client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = await asyncio.to_thread(
            self.client.request, request.method, str(request.url), headers=request.headers.multi_items(), content=body
        )
        return httpx2.Response(response.status_code, headers=response.headers.multi_items(), content=response.content)


@asynccontextmanager
async def over_http(client: TestClient, key: str | None = None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(transport=InProcess(client), headers=headers) as http:
        async with Client(streamable_http_client(MCP_URL, http_client=http), mode=mode) as session:
            yield session


async def use(session: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}
