"""The official Letta SDK over the app's in-process transport: the same requests, headers, streaming and parsing
as against a server at http://host:8000/letta."""

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
from fastapi.testclient import TestClient
from letta_client import Letta


class ThroughTestClient(httpx.BaseTransport):
    """The SDK's httpx requests sent through the app's TestClient (an httpx2 client), and its answers streamed back
    as the app sends them. Each status is recorded like the TestClient's own, so that a 500 fails the test."""

    def __init__(self, client: TestClient):
        self.client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        sent = self.client.build_request(
            request.method, str(request.url), headers=request.headers.multi_items(), content=request.read()
        )
        response = self.client.send(sent, stream=True)
        statuses = getattr(self.client, "statuses", None)
        if statuses is not None:
            statuses.append((f"{request.method} {request.url.path}", response.status_code))
        return httpx.Response(
            response.status_code, headers=response.headers.multi_items(), stream=_Body(response), request=request
        )


class _Body(httpx.SyncByteStream):
    def __init__(self, response: Any):
        self.response = response

    def __iter__(self) -> Iterator[bytes]:
        yield from self.response.iter_raw()

    def close(self) -> None:
        self.response.close()


def letta_sdk(client: TestClient, key: str | None = "any-key") -> Letta:
    http = httpx.Client(transport=ThroughTestClient(client), base_url=str(client.base_url))
    return Letta(base_url=f"{client.base_url}/letta", api_key=key, http_client=http, max_retries=0)


def unique(name: str) -> str:
    """Tests share one database: an agent name of this test's own."""
    return f"{name}-{uuid.uuid4().hex[:8]}"
