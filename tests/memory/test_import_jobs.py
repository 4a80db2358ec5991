"""Bulk imports as jobs (POST …/archival/import): progress, cancel, resume after a killed process with no item
stored twice, the formats and their errors, the batch's 413 that points to the job, and `engram import-passages`."""

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer
from sqlalchemy import func, update
from sqlmodel import select

from app import db
from app.agents.models import Agent
from app.auth.models import DEFAULT_TENANT_ID
from app.llm.embeddings import build_embedder
from app.memory.archival import imports
from app.memory.archival.imports import ImportWorker, create_job
from app.memory.models import ImportJob
from app.memory.schemas import PassageCreate
from app.settings import Settings
from testkit.bulk import JSON_LINES, json_lines
from testkit.scripted_llm import EMBEDDING_DIM, ScriptedLLM
from testkit.service_process import start_service, stop_service
from tests.support.database import create_database, run_sql
from tests.support.imports import ended, wait_for
from tests.support.service import Cli, app_of


def facts(n: int, prefix: str = "fact") -> list[dict[str, Any]]:
    return [{"content": f"{prefix} {i}: the user's note number {i} mentions item-{i * 7919 % 10007}"} for i in range(n)]


def service_env(database_url: str, embeddings: ScriptedLLM) -> dict[str, str]:
    """`engram serve` on this database, embedding through the scripted endpoint (fast, and it can be made to fail)."""
    return {
        "DATABASE_URL": database_url,
        "OPENAI_API_KEY": "t",
        "ENGRAM_EMBEDDING_PROVIDER": "openai",
        "ENGRAM_EMBEDDING_BASE_URL": embeddings.url,
        "ENGRAM_EMBEDDING_MODEL": "hashed",
        "ENGRAM_EMBEDDING_DIM": str(EMBEDDING_DIM),
    }


def test_json_lines_import_runs_as_a_job_with_progress(client: TestClient, agent: dict, settings: Settings) -> None:
    items: list[dict[str, Any]] = [
        {"content": "ユーザーは大阪に住んでいる", "tags": ["home"], "occurred_at": "2024-05-01T09:00:00+09:00"},
        {"content": "The user's sister is called Hana", "tags": ["family"]},
        {"content": "The user's sister is called Hana!"},  # a near-duplicate: stored once
        *facts(40),
    ]
    response = client.post(f"/v1/agents/{agent['id']}/archival/import", content=json_lines(items), headers=JSON_LINES)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["status"] in ("queued", "running") and job["total"] == len(items)
    assert response.headers["location"] == f"/v1/agents/{agent['id']}/archival/import/{job['id']}"

    seen = [job]

    def seen_until_ended(polled: dict[str, Any]) -> bool:
        seen.append(polled)
        return ended(polled)

    job = wait_for(client, response.headers["location"], seen_until_ended)
    assert (job["status"], job["done"], job["duplicates"], job["eta_seconds"]) == ("done", len(items), 1, None)
    assert job["rate_per_second"] > 0 and job["finished_at"] is not None
    assert all(a["done"] <= b["done"] for a, b in zip(seen, seen[1:], strict=False))  # progress only goes forward

    stored = client.get(f"/v1/agents/{agent['id']}/archival", params={"limit": 100}).json()["items"]
    assert len(stored) == len(items) - 1
    osaka = next(p for p in stored if p["content"] == "ユーザーは大阪に住んでいる")
    assert (osaka["tags"], osaka["occurred_at"]) == (["home"], "2024-05-01T00:00:00Z")
    hits = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "大阪", "k": 1}).json()["items"]
    assert hits[0]["content"] == "ユーザーは大阪に住んでいる"
    [(left,)] = run_sql(str(settings.database_url), "SELECT count(*) FROM import_items WHERE job_id = :j", {"j": job["id"]})
    assert left == 0  # items leave as they are stored


def test_a_json_array_imports_too(client: TestClient, agent: dict) -> None:
    response = client.post(f"/v1/agents/{agent['id']}/archival/import", json=facts(5, "array"))
    assert response.status_code == 202, response.text
    job = wait_for(client, response.headers["location"], ended)
    assert (job["status"], job["done"], job["total"]) == ("done", 5, 5)


@pytest.mark.parametrize(
    ("body", "headers", "status", "says"),
    [
        (b'{"content": "ok"}\n{"content": \n', JSON_LINES, 422, "line 2 is not valid JSON"),
        (b'{"content": "ok"}\n\n{"tags": ["x"]}', JSON_LINES, 422, "line 3: content: Field required"),
        (b'[{"content": "ok"}, {"content": ""}]', {"Content-Type": "application/json"}, 422, "item 1: content:"),
        (b'{"content": "not in an array"}', {"Content-Type": "application/json"}, 422, "must be an array"),
        (b"[]", {"Content-Type": "application/json"}, 422, "holds no passages"),
        (b'{"content": "ok", "colour": 1}', JSON_LINES, 422, "line 1: colour: Extra inputs"),
        (b"content=ok", {"Content-Type": "text/plain"}, 415, "application/x-ndjson"),
    ],
)
def test_a_bad_import_is_refused_whole(
    client: TestClient, agent: dict, body: bytes, headers: dict[str, str], status: int, says: str
) -> None:
    response = client.post(f"/v1/agents/{agent['id']}/archival/import", content=body, headers=headers)
    assert response.status_code == status, response.text
    assert says in response.json()["detail"]
    assert client.get(f"/v1/agents/{agent['id']}/archival").json()["items"] == []  # nothing stored, no job


def test_unknown_jobs_and_other_agents_jobs_are_404(client: TestClient, agent: dict) -> None:
    other = client.post("/v1/agents", json={"name": f"other-{uuid.uuid4().hex[:6]}"}).json()
    job = client.post(f"/v1/agents/{agent['id']}/archival/import", json=facts(1)).json()
    assert client.get(f"/v1/agents/{agent['id']}/archival/import/{uuid.uuid4()}").status_code == 404
    assert client.get(f"/v1/agents/{other['id']}/archival/import/{job['id']}").status_code == 404
    assert client.post(f"/v1/agents/{other['id']}/archival/import/{job['id']}/cancel").status_code == 404


def test_cancel_keeps_what_was_stored_and_drops_the_rest(client: TestClient, agent: dict) -> None:
    location = client.post(f"/v1/agents/{agent['id']}/archival/import", json=facts(300, "long")).headers["location"]
    cancelled = client.post(f"{location}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["done"] < 200
    time.sleep(1.5)  # a slice in flight when the cancel came is not stored
    job = client.get(location).json()
    assert (job["status"], job["done"]) == ("cancelled", cancelled.json()["done"])
    stored = client.get(f"/v1/agents/{agent['id']}/archival", params={"limit": 200}).json()["items"]
    assert len(stored) == job["done"]
    assert client.post(f"{location}/cancel").json()["status"] == "cancelled"  # again: the same answer


def test_a_batch_too_large_to_embed_while_waiting_points_to_the_job(client: TestClient, agent: dict) -> None:
    many = client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": facts(501)})
    long = client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": [{"content": "x" * 19_000}] * 3})
    for response in (many, long):
        assert response.status_code == 413, response.text
        assert response.json()["error"] == "payload_too_large"
        assert f"POST /v1/agents/{agent['id']}/archival/import" in response.json()["detail"]
    assert client.get(f"/v1/agents/{agent['id']}/archival").json()["items"] == []


def test_an_import_may_be_larger_than_other_requests(client: TestClient, agent: dict) -> None:
    limit = app_of(client).state.settings.max_request_bytes
    items = [{"content": f"entry {i} " + "lorem ipsum dolor sit amet " * 40} for i in range(limit // 1000 + 10)]
    body = json_lines(items)
    assert len(body) > limit
    chat = client.post(f"/v1/agents/{agent['id']}/archival/batch", content=body, headers={"Content-Type": "application/json"})
    assert chat.status_code == 413
    response = client.post(f"/v1/agents/{agent['id']}/archival/import", content=body, headers=JSON_LINES)
    assert response.status_code == 202, response.text
    assert client.post(f"{response.headers['location']}/cancel").json()["status"] == "cancelled"


def test_import_passages_command_shows_progress(
    cli: Cli, agent: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "notes.jsonl"
    source.write_bytes(json_lines(facts(12, "cli")))
    cli("import-passages", str(source), agent["id"])
    err = capsys.readouterr().err
    assert "12/12" in err  # rich's bar: stored of total
    assert ": done, 12 of 12 passages" in err


def test_a_killed_process_resumes_the_job_and_stores_no_item_twice(postgres_server: PostgresServer) -> None:
    """SIGKILL mid-import (a slow embedding endpoint keeps it mid-way), start again: the job finishes, every item
    stored exactly once (a slice stored twice would show as near-duplicates, and as more passages)."""
    embeddings = ScriptedLLM().start()
    embeddings.embedding_delay = 0.3  # per slice of 32 items
    url = create_database(postgres_server, f"engram_imports_{uuid.uuid4().hex[:8]}")
    env = service_env(url, embeddings)
    total = 320
    process, base = start_service(env)
    try:
        with httpx.Client(base_url=base, timeout=30) as api:
            agent = api.post("/v1/agents", json={"name": "importer"}).json()
            started = api.post(f"/v1/agents/{agent['id']}/archival/import", content=json_lines(facts(total)), headers=JSON_LINES)
            location = started.headers["location"]
            wait_for(api, location, lambda j: j["done"] >= 32)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            killed_at = run_sql(url, "SELECT done FROM import_jobs")[0][0]
            assert 0 < killed_at < total

            process, base = start_service(env)
            with httpx.Client(base_url=base, timeout=30) as again:
                job = wait_for(again, location, ended)
    finally:
        stop_service(process)
        embeddings.stop()
    assert (job["status"], job["done"], job["total"], job["duplicates"]) == ("done", total, total, 0)
    [(passages, distinct)] = run_sql(url, "SELECT count(*), count(DISTINCT content) FROM archival_passages")
    assert passages == distinct == total


def test_a_failing_job_waits_without_holding_up_others_and_a_refused_item_ends_it(postgres_server: PostgresServer) -> None:
    """An embedding endpoint that fails a slice (503) makes its job wait and try again, while a later job runs; one
    that refuses an item (400) ends its job `failed` at that item, every item before it stored."""
    embeddings = ScriptedLLM().start()
    embeddings.embedding_refusals = {"FLAKY": 503, "REFUSED": 400}
    url = create_database(postgres_server, f"engram_imports_{uuid.uuid4().hex[:8]}")
    env = service_env(url, embeddings) | {"ENGRAM_LLM_MAX_RETRIES": "0"}
    process, base = start_service(env)
    try:
        with httpx.Client(base_url=base, timeout=30) as api:
            agent = api.post("/v1/agents", json={"name": "importer"}).json()
            jobs = f"/v1/agents/{agent['id']}/archival/import"
            flaky = api.post(jobs, json=[*facts(40, "early"), {"content": "FLAKY note"}]).headers["location"]
            waiting = wait_for(api, flaky, lambda j: j["error"] is not None)
            later = wait_for(api, api.post(jobs, json=facts(10, "later")).headers["location"], ended)
            assert later["status"] == "done" and later["done"] == 10
            waiting = api.get(flaky).json()
            assert (waiting["status"], waiting["done"]) == ("running", 32)  # the first slice stored, the second waits
            assert "503" in waiting["error"]

            embeddings.embedding_refusals.pop("FLAKY")  # the endpoint recovers: the job goes on from where it was
            resumed = wait_for(api, flaky, ended, timeout=60)
            assert (resumed["status"], resumed["done"], resumed["error"]) == ("done", 41, None)

            refused = api.post(jobs, json=[*facts(40, "kept"), {"content": "REFUSED note"}, *facts(5, "after")])
            failed = wait_for(api, refused.headers["location"], ended)
    finally:
        stop_service(process)
        embeddings.stop()
    # The refused slice (items 32-45) went again one at a time: 32-39 stored, item 40 refused on its own.
    assert (failed["status"], failed["done"], failed["total"]) == ("failed", 40, 46)
    assert "at item 40" in failed["error"] and "400" in failed["error"]
    [(kept,)] = run_sql(url, "SELECT count(*) FROM archival_passages WHERE content LIKE 'kept %'")
    assert kept == 40
    assert run_sql(url, "SELECT count(*) FROM import_items") == [(0,)]


def test_a_job_that_keeps_failing_waits_longer_each_time_then_fails(postgres_server: PostgresServer) -> None:
    """Each failure in a row doubles the wait before the next attempt (RETRY_SECONDS, 2x, 4x…); the worker does not
    run the job before then; after MAX_ATTEMPTS the job ends `failed` and its items are dropped."""
    embeddings = ScriptedLLM().start()
    embeddings.embedding_refusals = {"": 503}  # every request: the endpoint is down
    url = create_database(postgres_server, f"engram_imports_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, EMBEDDING_DIM)
    settings = Settings(
        database_url=url,
        openai_api_key="t",
        llm_max_retries=0,
        embedding_provider="openai",
        embedding_base_url=embeddings.url,
        embedding_model="hashed",
        embedding_dim=EMBEDDING_DIM,
    )

    async def run() -> list[tuple[str, int, float | None, bool]]:
        engine = db.create_engine(url)
        sessions = db.session_factory(engine)
        worker = ImportWorker(engine, sessions, build_embedder(settings))
        seen = []
        try:
            async with db.transaction(sessions) as session:
                agent = Agent(tenant_id=DEFAULT_TENANT_ID, name="importer")
                session.add(agent)
                await session.flush()
                await create_job(session, agent.id, [PassageCreate(content="a note")])
            for _ in range(imports.MAX_ATTEMPTS):
                ran = await worker.run_next()
                again = await worker.run_next()  # the job waits: nothing to run
                async with sessions() as session:
                    job = (await session.exec(select(ImportJob))).one()
                    wait = (job.retry_at - job.updated_at).total_seconds() if job.retry_at else None
                    seen.append((job.status, job.attempts, wait, ran and not again))
                    await session.execute(update(ImportJob).values(retry_at=func.now()))  # due now
                    await session.commit()
        finally:
            await engine.dispose()
        return seen

    try:
        seen = asyncio.run(run())
    finally:
        embeddings.stop()
    waits = [imports.RETRY_SECONDS * 2**n for n in range(imports.MAX_ATTEMPTS - 1)]
    assert seen[:-1] == [("running", n + 1, wait, True) for n, wait in enumerate(waits)]
    assert seen[-1] == ("failed", imports.MAX_ATTEMPTS, None, True)
    assert run_sql(url, "SELECT count(*) FROM import_items") == [(0,)]
