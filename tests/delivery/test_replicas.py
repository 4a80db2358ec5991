"""Several `engram serve` processes on one database: turns of one agent strictly serialised across processes,
no lost core-memory update, idempotent retries, events relayed between replicas, and a process killed mid-turn."""

import asyncio
import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from pgserver.postgres_server import PostgresServer
from sqlalchemy import text
from websockets.sync.client import connect

from app import db
from testkit.scripted_llm import ScriptedLLM, call, tools
from testkit.service_process import start_service, stop_service
from tests.support.database import create_database

CHATS = 40


def remember_then_reply(request: dict[str, Any]) -> dict[str, Any]:
    """Stateless script: a new user message → append it to core memory; a tool result → reply."""
    last = request["messages"][-1]
    if last["role"] == "user":
        return tools(call("core_memory_append", label="human", content=f"- {last['content']}"))
    return tools(call("send_message", text="noted"))


def query(url: str, sql: str, **params: Any) -> list[Any]:
    async def run() -> list[Any]:
        engine = db.create_engine(url)
        try:
            async with engine.connect() as conn:
                return list((await conn.execute(text(sql), params)).all())
        finally:
            await engine.dispose()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def replicas(postgres_server: PostgresServer, llm: ScriptedLLM) -> Iterator[tuple[str, list[str]]]:
    url = create_database(postgres_server, f"engram_replicas_{uuid.uuid4().hex[:8]}")
    env = {
        "DATABASE_URL": url,
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "t",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_TURN_LOCK_TIMEOUT_SECONDS": "300",
        "ENGRAM_LLM_MAX_RETRIES": "0",
    }
    started = [start_service(env) for _ in range(2)]
    try:
        yield url, [base for _, base in started]
    finally:
        for process, _ in started:
            stop_service(process)


def test_concurrent_chats_through_two_processes_are_serialised_and_lose_nothing(
    replicas: tuple[str, list[str]], llm: ScriptedLLM
) -> None:
    url, bases = replicas
    llm.reset(fallback=remember_then_reply)
    agent = httpx.post(f"{bases[0]}/v1/agents", json={"name": "shared", "blocks": [{"label": "human", "limit": 5000}]}).json()
    watched: list[dict] = []
    watching = threading.Event()

    def watch() -> None:  # a WebSocket on replica 0 sees the turns that replica 1 runs too
        with connect(bases[0].replace("http", "ws") + f"/v1/agents/{agent['id']}/ws") as ws:
            watching.set()
            while sum(e["type"] == "turn_completed" for e in watched) < CHATS:
                watched.append(json.loads(ws.recv(timeout=120)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert watching.wait(10)

    def send(i: int) -> httpx.Response:
        return httpx.post(f"{bases[i % 2]}/v1/agents/{agent['id']}/chat", json={"message": f"fact {i}"}, timeout=300)

    with ThreadPoolExecutor(CHATS) as pool:
        responses = list(pool.map(send, range(CHATS)))
    watcher.join(timeout=60)
    assert [r.status_code for r in responses] == [200] * CHATS, [r.text for r in responses if r.status_code != 200]

    users = query(url, "SELECT content FROM messages WHERE agent_id = :a AND role = 'user'", a=agent["id"])
    assert sorted(u.content for u in users) == sorted(f"fact {i}" for i in range(CHATS))  # each exactly once
    human = httpx.get(f"{bases[1]}/v1/agents/{agent['id']}/memory").json()["blocks"]
    lines = next(b["value"] for b in human if b["label"] == "human").splitlines()
    assert sorted(lines) == sorted(f"- fact {i}" for i in range(CHATS))  # no lost update
    turns = query(url, "SELECT created_at, finished_at FROM turns WHERE agent_id = :a ORDER BY created_at", a=agent["id"])
    assert len(turns) == CHATS
    for earlier, later in zip(turns, turns[1:], strict=False):
        assert earlier.finished_at <= later.created_at, "two turns of one agent overlapped"
    completed = {e["turn_id"] for e in watched if e["type"] == "turn_completed"}
    assert completed == {r.json()["turn_id"] for r in responses}


def test_one_idempotency_key_sent_five_times_at_once_runs_one_turn(replicas: tuple[str, list[str]], llm: ScriptedLLM) -> None:
    url, bases = replicas
    llm.reset(fallback=remember_then_reply)
    agent = httpx.post(f"{bases[0]}/v1/agents", json={"name": "idem"}).json()

    def send(i: int) -> httpx.Response:
        return httpx.post(
            f"{bases[i % 2]}/v1/agents/{agent['id']}/chat",
            json={"message": "pay the invoice"},
            headers={"Idempotency-Key": "invoice-7"},
            timeout=60,
        )

    with ThreadPoolExecutor(5) as pool:
        responses = list(pool.map(send, range(5)))
    assert {r.status_code for r in responses} <= {200, 202}
    assert len({r.json()["turn_id"] for r in responses}) == 1
    assert query(url, "SELECT count(*) AS n FROM turns WHERE agent_id = :a", a=agent["id"])[0].n == 1
    assert query(url, "SELECT count(*) AS n FROM messages WHERE agent_id = :a AND role = 'user'", a=agent["id"])[0].n == 1


def test_a_process_killed_mid_turn_leaves_an_interrupted_turn_and_a_usable_agent(
    postgres_server: PostgresServer, llm: ScriptedLLM
) -> None:
    url = create_database(postgres_server, f"engram_kill_{uuid.uuid4().hex[:8]}")
    env = {
        "DATABASE_URL": url,
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "t",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_LLM_MAX_RETRIES": "0",
    }
    in_llm = threading.Event()
    release = threading.Event()

    def stuck(request: dict[str, Any]) -> dict[str, Any]:
        in_llm.set()
        release.wait(30)
        return tools(call("send_message", text="too late"))

    llm.reset(tools(call("core_memory_append", label="human", content="Name: Kenji")), stuck)
    process, base = start_service(env)
    agent = httpx.post(f"{base}/v1/agents", json={"name": "fragile"}).json()
    pending = ThreadPoolExecutor(1).submit(
        lambda: httpx.post(f"{base}/v1/agents/{agent['id']}/chat", json={"message": "I am Kenji"}, timeout=60)
    )
    assert in_llm.wait(30)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    release.set()
    with pytest.raises(httpx.HTTPError):
        pending.result()

    llm.reset(tools(call("send_message", text="welcome back")))
    process, base = start_service(env)
    try:
        [turn] = query(url, "SELECT id, status, stop_reason FROM turns WHERE agent_id = :a", a=agent["id"])
        assert (turn.status, turn.stop_reason) == ("interrupted", "interrupted")
        replay = httpx.get(f"{base}/v1/agents/{agent['id']}/turns/{turn.id}").json()
        assert [e["type"] for e in replay["events"]][-1] == "turn_completed"
        # The committed first step stands: the memory edit and its messages, nothing half-written.
        memory = httpx.get(f"{base}/v1/agents/{agent['id']}/memory").json()["blocks"]
        assert next(b["value"] for b in memory if b["label"] == "human") == "Name: Kenji"
        roles = [m["role"] for m in reversed(httpx.get(f"{base}/v1/agents/{agent['id']}/messages").json()["items"])]
        assert roles == ["user", "assistant", "tool"]
        again = httpx.post(f"{base}/v1/agents/{agent['id']}/chat", json={"message": "still there?"}, timeout=60)
        assert again.status_code == 200 and again.json()["reply"] == "welcome back"
    finally:
        stop_service(process)
