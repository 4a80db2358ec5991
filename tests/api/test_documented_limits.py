"""docs/api.md's Limits table says what the service does: each row's figures are the ones the code enforces, and a
request just over a limit gets the status the row names."""

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient

from app.settings import Settings
from tests.support import ROOT


@dataclass
class Over:
    method: str
    path: str  # {a}: the agent's id
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None


DEFAULTS = Settings(database_url="postgresql+asyncpg://unused/unused")
ROWS: dict[str, tuple[list[int], list[Over]]] = {
    "a request body": (
        [DEFAULTS.max_request_bytes],
        [
            Over(
                "POST",
                "/v1/agents",
                content=b" " * (DEFAULTS.max_request_bytes + 1),
                headers={"Content-Type": "application/json"},
            )
        ],
    ),
    "a chat message": ([32_000], [Over("POST", "/v1/agents/{a}/chat", {"message": "x" * 32_001})]),
    "a handed-in message": (
        [32_000, 500, 200],
        [
            Over("POST", "/v1/agents/{a}/messages", {"messages": [{"role": "user", "content": "x" * 32_001}]}),
            Over("POST", "/v1/agents/{a}/messages", {"messages": [{"role": "user", "content": "x"}] * 501}),
            Over("POST", "/v1/agents/{a}/messages", {"messages": [{"role": "user", "content": "x", "id": "i" * 201}]}),
        ],
    ),
    "a passage": (
        [20_000, 16, 200],
        [
            Over("POST", "/v1/agents/{a}/archival", {"content": "x" * 20_001}),
            Over("POST", "/v1/agents/{a}/archival", {"content": "x", "tags": [f"t{i}" for i in range(17)]}),
            Over("POST", "/v1/agents/{a}/archival", {"content": "x", "sources": [str(uuid.uuid4()) for _ in range(17)]}),
            Over("POST", "/v1/agents/{a}/archival", {"content": "x", "key": "k" * 201}),
            Over("PUT", "/v1/agents/{a}/archival/keys/" + "k" * 201, {"content": "x"}),
        ],
    ),
    "a batch": (
        [500, DEFAULTS.max_batch_chars],
        [
            Over("POST", "/v1/agents/{a}/archival/batch", {"items": [{"content": f"item {i}"} for i in range(501)]}),
            Over("POST", "/v1/agents/{a}/archival/batch", {"items": [{"content": "x" * 20_000}] * 3}),
        ],
    ),
    "an import": ([DEFAULTS.max_import_bytes], []),  # 50 MB is not worth sending to see its 413
    "a search query": (
        [2_000],
        [
            Over("GET", "/v1/agents/{a}/archival", params={"query": "x" * 2_001}),
            Over("GET", "/v1/agents/{a}/messages", params={"query": "x" * 2_001}),
            Over("POST", "/v1/agents/{a}/recollection", {"query": "x" * 2_001}),
        ],
    ),
    "a recollection": (
        [50, 32_000, 20_000, 32],
        [
            Over("POST", "/v1/agents/{a}/recollection", {"messages": [{"role": "user", "content": "x"}] * 51}),
            Over("POST", "/v1/agents/{a}/recollection", {"query": "x", "core_blocks": [f"b{i}" for i in range(33)]}),
            Over("POST", "/v1/agents/{a}/recollection", {"messages": [{"role": "user", "content": "x" * 32_001}]}),
            Over("POST", "/v1/agents/{a}/recollection", {"query": "x", "max_chars": 20_001}),
        ],
    ),
    "a core memory block": (
        [2_000, 100_000, 1_000, 32],
        [
            Over("PUT", "/v1/agents/{a}/memory/human", {"value": "x" * 2_001}),
            Over("PUT", "/v1/agents/{a}/memory/human", {"value": "x", "limit": 100_001}),
            Over("PUT", "/v1/agents/{a}/memory/human", {"value": "x", "description": "d" * 1_001}),
            Over("POST", "/v1/agents", {"name": "many blocks", "blocks": [{"label": f"b{i}"} for i in range(33)]}),
        ],
    ),
    "an agent": (
        [200, 20_000],
        [
            Over("POST", "/v1/agents", {"name": "n" * 201}),
            Over("GET", "/v1/agents", params={"name": "n" * 201}),
            Over("POST", "/v1/agents", {"name": "n", "system": "s" * 20_001}),
            Over("POST", "/v1/agents", {"name": "n", "model": "m" * 201}),
        ],
    ),
    "a page": (
        [200, 1_000],
        [
            Over("GET", "/v1/agents", params={"limit": 201}),
            Over("GET", "/v1/agents/{a}/archival", params={"limit": 201}),
            Over("GET", "/v1/agents/{a}/messages", params={"limit": 201}),
            Over("GET", "/letta/v1/agents/", params={"limit": 1_001}),
        ],
    ),
    "an `Idempotency-Key`": (
        [200],
        [Over("POST", "/v1/agents/{a}/chat", {"message": "hi"}, headers={"Idempotency-Key": "k" * 201})],
    ),
}


def documented_limits() -> dict[str, str]:
    """The Limits table's rows by the start of their first cell (up to its parenthesis)."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| What")]
    return {line[2:].split(" | ")[0].split(" (")[0]: line for line in rows}


def test_the_documented_limits_are_the_enforced_ones(client: TestClient, agent: dict) -> None:
    documented = documented_limits()
    assert set(documented) == set(ROWS), "a row of docs/api.md's Limits table has no check here, or a check no row"
    for name, (figures, requests) in ROWS.items():
        row = documented[name]
        for figure in figures:
            assert re.search(rf"(?<![\d,]){figure:,}(?!\d|,\d)", row), (figure, row)
        status = int(re.findall(r"\b4\d\d\b", row.rsplit(" | ", 1)[1])[0])
        for over in requests:
            path = over.path.format(a=agent["id"])
            response = client.request(
                over.method, path, json=over.json, params=over.params, headers=over.headers, content=over.content
            )
            assert response.status_code == status, (name, path, response.text[:300])
            if path.startswith("/v1/"):
                assert set(response.json()) == {"error", "detail"}, response.json()
