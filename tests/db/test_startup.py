"""Start-up: migrations by command, the embedding-dimension guard, turns orphaned by a dead process, busy agents."""

import asyncio
import re
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer
from sqlalchemy import text

from app import db
from app.llm.embeddings import Embedder
from app.llm.embeddings.space import EmbeddingSpaceMismatch, stored_dim
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support import ROOT
from tests.support.database import create_database
from tests.support.service import checked_client


def test_engram_migrate_creates_the_schema(postgres_server: PostgresServer) -> None:
    url = create_database(postgres_server, f"engram_migrate_{uuid.uuid4().hex[:8]}")
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate"],
        env={"DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout

    async def stored() -> int | None:
        engine = db.create_engine(url)
        try:
            async with engine.connect() as conn:
                return await stored_dim(conn)
        finally:
            await engine.dispose()

    assert asyncio.run(stored()) == 384


def test_another_embedding_model_is_a_clear_startup_error(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    with checked_client(create_app(settings, embedder=embedder)):  # the shared database: e5 vectors
        pass
    remote = settings.model_copy(
        update={"embedding_provider": "openai", "embedding_model": "hashed", "embedding_dim": 8, "migrate_on_start": False}
    )
    with pytest.raises(
        EmbeddingSpaceMismatch, match=r"made by multilingual-e5-small-q4 \(384 dims\).*hashed \(8 dims\).*engram reembed"
    ):
        with checked_client(create_app(remote)):
            pass


def test_turns_left_running_by_a_dead_process_are_interrupted(client: TestClient, settings: Settings, embedder: Embedder) -> None:
    agent = client.post("/v1/agents", json={"name": "crashy"}).json()
    turn_id = uuid.uuid4()

    async def orphan() -> None:
        engine = db.create_engine(settings.database_url or "")
        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO turns (id, agent_id, status, message, usage) VALUES (:t, :a, 'running', 'hello', '{}')"),
                {"t": turn_id, "a": agent["id"]},
            )
            await conn.execute(
                text("INSERT INTO turn_events (turn_id, seq, agent_id, payload) VALUES (:t, 0, :a, CAST(:p AS jsonb))"),
                {
                    "t": turn_id,
                    "a": agent["id"],
                    "p": f'{{"type": "turn_started", "agent_id": "{agent["id"]}", "turn_id": "{turn_id}", "seq": 0, "message": "hello"}}',
                },
            )
        await engine.dispose()

    asyncio.run(orphan())
    with checked_client(create_app(settings, embedder=embedder)) as restarted:
        turn = restarted.get(f"/v1/agents/{agent['id']}/turns/{turn_id}").json()
    assert turn["status"] == "interrupted" and turn["stop_reason"] == "interrupted"
    assert [e["type"] for e in turn["events"]] == ["turn_started", "turn_completed"]


def test_a_second_turn_waits_for_the_first_then_gets_409(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    impatient = settings.model_copy(update={"turn_lock_timeout_seconds": 0.5})
    started = threading.Event()

    def slow_reply(request: dict) -> dict:
        started.set()
        time.sleep(2)
        return tools(call("send_message", text="done"))

    with checked_client(create_app(impatient, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "busy"}).json()
        other = client.post("/v1/agents", json={"name": "free"}).json()
        llm.reset(slow_reply, tools(call("send_message", text="other agent")))
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.post, f"/v1/agents/{agent['id']}/chat", json={"message": "one"})
            assert started.wait(10)
            second = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "two"})
            elsewhere = client.post(f"/v1/agents/{other['id']}/chat", json={"message": "meanwhile"})
            assert first.result().status_code == 200
        assert second.status_code == 409
        assert second.json()["error"] == "agent_busy" and int(second.headers["retry-after"]) >= 1
        assert elsewhere.status_code == 200 and elsewhere.json()["reply"] == "other agent"


def test_engram_keys_create_issues_a_working_key(postgres_server: PostgresServer, embedder: Embedder) -> None:
    url = create_database(postgres_server, f"engram_keys_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, 384)
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "--tenant", "acme"],
        env={"DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    key = result.stdout.rsplit(": ", 1)[1].strip()
    with checked_client(create_app(Settings(database_url=url), embedder=embedder)) as client:
        assert client.get("/v1/agents").status_code == 401  # a key exists now: loopback is no longer enough
        assert client.get("/v1/agents", headers={"X-API-Key": key}).status_code == 200


def test_engram_reembed_moves_memory_to_another_embedder(
    postgres_server: PostgresServer, embedder: Embedder, llm: ScriptedLLM
) -> None:
    url = create_database(postgres_server, f"engram_reembed_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, 384)
    with checked_client(create_app(Settings(database_url=url), embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "movable"}).json()
        client.post(
            f"/v1/agents/{agent['id']}/archival/batch",
            json={"items": [{"content": "green tea every morning"}, {"content": "the cat is called Mochi"}]},
        )
    remote = {
        "ENGRAM_EMBEDDING_PROVIDER": "openai",
        "ENGRAM_EMBEDDING_MODEL": "hashed",
        "ENGRAM_EMBEDDING_DIM": "8",
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "t",
    }
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "reembed"],
        env={"DATABASE_URL": url, "PATH": "/usr/bin:/bin", **remote},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "re-embedded 2 passages" in result.stdout
    moved = Settings(
        database_url=url,
        embedding_provider="openai",
        embedding_model="hashed",
        embedding_dim=8,
        openai_base_url=llm.url,
        openai_api_key="t",
    )
    with checked_client(create_app(moved)) as client:  # starts: the database now stores 8 dimensions
        hits = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "what is the cat called"}).json()["items"]
        assert hits[0]["content"] == "the cat is called Mochi"


def test_migrations_never_import_the_application() -> None:
    # A migration must do the same thing whatever the application later becomes: it carries frozen copies.
    root = ROOT / "alembic"
    for path in [root / "env.py", *sorted((root / "versions").glob("*.py"))]:
        imports = [line for line in path.read_text().splitlines() if re.match(r"\s*(from|import)\s+app\b", line)]
        assert not imports, f"{path.name}: {imports}"


def test_migration_files_list_in_the_order_they_run() -> None:
    root = ROOT
    scripts = ScriptDirectory.from_config(Config(str(root / "alembic.ini")))
    chain = [Path(script.path).name for script in reversed(list(scripts.walk_revisions()))]
    assert chain == sorted(path.name for path in (root / "alembic" / "versions").glob("*.py"))
