"""The official Letta SDK over the app's in-process transport: the same requests, headers, streaming and parsing
as against a server at http://host:8000/letta."""

import uuid

import httpx
from fastapi.testclient import TestClient
from letta_client import Letta


def letta_sdk(client: TestClient, key: str | None = "any-key") -> Letta:
    """A Letta client sending through `client`; its responses are recorded like the TestClient's own, so that a
    500 fails the test (checked_client)."""

    def record(response: httpx.Response) -> None:
        statuses = getattr(client, "statuses", None)
        if statuses is not None:
            statuses.append((f"{response.request.method} {response.request.url.path}", response.status_code))

    if record not in client.event_hooks["response"]:
        client.event_hooks["response"].append(record)
    return Letta(base_url=f"{client.base_url}/letta", api_key=key, http_client=client, max_retries=0)


def unique(name: str) -> str:
    """Tests share one database: an agent name of this test's own."""
    return f"{name}-{uuid.uuid4().hex[:8]}"
