"""Loading many passages into an agent the way a user would: one import job (POST …/archival/import, JSON lines),
watched until it ends. Synchronous (an httpx.Client or a TestClient) and asynchronous (an httpx.AsyncClient)."""

import asyncio
import json
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx

JSON_LINES = {"Content-Type": "application/x-ndjson"}
POLL_SECONDS = 0.2


def json_lines(items: list[dict[str, Any]]) -> bytes:
    """An import body: one passage object per line."""
    return "\n".join(json.dumps(item, ensure_ascii=False) for item in items).encode()


def _import_body(texts: list[str], dates: Sequence[datetime | None] | None) -> bytes:
    """One passage per text; `dates`: each one's occurred_at (None: when it is stored)."""
    items = [{"content": t} for t in texts]
    for item, when in zip(items, dates or (), strict=False):
        if when is not None:
            item["occurred_at"] = when.isoformat()
    return json_lines(items)


def _ended(response: httpx.Response) -> dict[str, Any] | None:
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()
    if job["status"] in ("queued", "running"):
        return None
    assert job["status"] == "done", job
    return job


def import_passages(
    client: httpx.Client, agent_id: str, texts: list[str], dates: Sequence[datetime | None] | None = None
) -> dict[str, Any]:
    """The finished job."""
    started = client.post(f"/v1/agents/{agent_id}/archival/import", content=_import_body(texts, dates), headers=JSON_LINES)
    assert started.status_code == 202, started.text
    while (job := _ended(client.get(started.headers["location"]))) is None:
        time.sleep(POLL_SECONDS)
    return job


async def import_passages_async(
    client: httpx.AsyncClient, agent_id: str, texts: list[str], dates: Sequence[datetime | None] | None = None
) -> dict[str, Any]:
    """The finished job."""
    started = await client.post(f"/v1/agents/{agent_id}/archival/import", content=_import_body(texts, dates), headers=JSON_LINES)
    assert started.status_code == 202, started.text
    while (job := _ended(await client.get(started.headers["location"]))) is None:
        await asyncio.sleep(POLL_SECONDS)
    return job
