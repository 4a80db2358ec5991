"""The database stopped and started under load: 503s (with Retry-After) while it is down, never a 500, and the
service recovers by itself, without a restart."""

import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pgserver
import pytest
from pgserver.postgres_server import PostgresServer, get_server

from app import db
from testkit.scripted_llm import ScriptedLLM
from testkit.service_process import start_service, stop_service


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    server = get_server(Path(tempfile.mkdtemp(prefix="engram-outage-")) / "pgdata", cleanup_mode="delete")
    yield server
    server.cleanup()


def stop_postgres(server: PostgresServer) -> None:
    # pg_ctl is one of the functions pgserver makes at import, one per binary it ships: invisible to mypy
    pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)  # type: ignore[attr-defined]


def test_requests_get_503_while_the_database_is_down_and_recover_alone(own_postgres: PostgresServer, llm: ScriptedLLM) -> None:
    url = db.asyncpg_url(own_postgres.get_uri())
    env = {"DATABASE_URL": url, "OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "t", "ENGRAM_LLM_MODEL": "scripted"}
    process, base = start_service(env)
    try:
        agent = httpx.post(f"{base}/v1/agents", json={"name": "steady"}).json()
        phase = "up"
        seen: list[tuple[str, int, str | None]] = []
        done = threading.Event()

        def load() -> None:
            while not done.is_set():
                for method, path, body in [
                    ("GET", f"/v1/agents/{agent['id']}/memory", None),
                    ("POST", f"/v1/agents/{agent['id']}/archival", {"content": f"note {uuid.uuid4()}"}),
                ]:
                    response = httpx.request(method, base + path, json=body, timeout=30)
                    seen.append((phase, response.status_code, response.headers.get("retry-after")))
                time.sleep(0.02)

        worker = threading.Thread(target=load)
        worker.start()
        time.sleep(1)
        phase = "down"
        stop_postgres(own_postgres)
        time.sleep(3)
        ready = httpx.get(f"{base}/readyz", timeout=10)
        assert ready.status_code == 503 and ready.headers["retry-after"]
        chat = httpx.post(f"{base}/v1/agents/{agent['id']}/chat", json={"message": "anyone?"}, timeout=30)
        assert chat.status_code == 503 and chat.json()["error"] == "database_unavailable"

        phase = "restarting"
        own_postgres.ensure_postgres_running()
        deadline = time.monotonic() + 30
        while httpx.get(f"{base}/readyz", timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the service did not recover by itself"
            time.sleep(0.2)
        phase = "recovered"
        time.sleep(1.5)
        done.set()
        worker.join(timeout=30)
    finally:
        stop_service(process)

    assert {status for _, status, _ in seen} <= {200, 201, 503}, "only successes and 503s, never a 500"
    down = [(status, retry) for p, status, retry in seen if p == "down"]
    assert down and all(status == 503 and retry for status, retry in down[len(down) // 2 :])
    recovered = [status for p, status, _ in seen if p == "recovered"]
    assert recovered and set(recovered) <= {200, 201}
