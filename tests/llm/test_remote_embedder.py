"""Turns and searches with an OpenAI-compatible embedding endpoint (the scripted server's /v1/embeddings): what is
asked of it, and what happens when it fails or misbehaves."""

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer

from app import db
from app.main import create_app
from app.memory.search import baseline as cohort_baseline
from app.runtime import runtime
from testkit.scripted_llm import EMBEDDING_DIM, ScriptedLLM, call, tools
from tests.support.chat import chat
from tests.support.database import create_database, run_sql
from tests.support.service import app_of, checked_client, run_in_app, scripted_settings

MEMORIES = "## Possibly relevant memories"


@contextmanager
def remote(postgres_server: PostgresServer, llm: ScriptedLLM) -> Iterator[tuple[TestClient, str]]:
    """A service on a database of its own whose embedder is the scripted endpoint (no retries), and that database."""
    url = create_database(postgres_server, f"engram_remote_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, EMBEDDING_DIM)
    hashed = {"embedding_provider": "openai", "embedding_model": "hashed", "embedding_dim": EMBEDDING_DIM}
    with checked_client(create_app(scripted_settings(url, llm, embedding_base_url=llm.url, **hashed))) as client:
        yield client, url


def stored_vectors(url: str, agent: dict, count: int) -> dict[str, str]:
    """Role -> vector of the agent's embedded messages, once `count` of them are (they are stored in the background)."""
    vectors = "SELECT role, embedding::text FROM messages WHERE agent_id = :a AND embedding_model = 'hashed'"
    deadline = time.monotonic() + 10
    while len(stored := dict(run_sql(url, vectors, {"a": uuid.UUID(agent["id"])}))) < count:
        assert time.monotonic() < deadline, "the turn's messages were not embedded"
        time.sleep(0.05)
    return stored


def test_a_symmetric_embedder_embeds_the_users_message_once(postgres_server: PostgresServer, llm: ScriptedLLM) -> None:
    """An OpenAI-compatible endpoint embeds queries and passages alike: the vector that searched memory for the
    user's message is the one stored for it, not asked for again."""
    with remote(postgres_server, llm) as (client, url):
        agent = client.post("/v1/agents", json={"name": "remote"}).json()
        llm.reset(tools(call("send_message", text="Kyoto is lovely in autumn")))
        llm.embedding_requests.clear()
        chat(client, agent, "I am planning a trip to Kyoto")
        stored = stored_vectors(url, agent, 2)
    asked = [text for request in llm.embedding_requests for text in request["input"]]  # generic passages too (baseline)
    assert asked.count("I am planning a trip to Kyoto") == 1 and asked.count("Kyoto is lovely in autumn") == 1
    assert set(stored) == {"user", "assistant"} and stored["user"] != stored["assistant"]


def test_an_embedder_failing_recollection_costs_the_turn_its_memories_not_its_reply(
    postgres_server: PostgresServer, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cohort_baseline, "_centroids", {})  # the baseline's generic passages, not embedded yet
    monkeypatch.setattr(llm, "embedding_refusals", {"Photosynthesis": 503})  # one of them: the endpoint is down
    with remote(postgres_server, llm) as (client, _):
        agent = client.post("/v1/agents", json={"name": "remote"}).json()
        client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user is planning a trip to Kyoto"})
        llm.reset(tools(call("send_message", text="Have a good trip!")))
        turn = chat(client, agent, "Am I planning a trip to Kyoto?")
        assert (turn["status"], turn["reply"]) == ("completed", "Have a good trip!")
        assert MEMORIES not in llm.requests[0]["messages"][0]["content"]
        monkeypatch.setattr(llm, "embedding_refusals", {})  # back: the next turn recollects
        llm.reset(tools(call("send_message", text="Kyoto!")))
        chat(client, agent, "Am I planning a trip to Kyoto?")
        assert "The user is planning a trip to Kyoto" in llm.requests[0]["messages"][0]["content"].split(MEMORIES)[1]


def test_the_sweep_sets_aside_a_message_the_endpoint_refuses_and_fills_the_others(
    postgres_server: PostgresServer, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    with remote(postgres_server, llm) as (client, url):
        agent = client.post("/v1/agents", json={"name": "remote"}).json()
        llm.reset(fallback=tools(call("send_message", text="ok")))
        chat(client, agent, "a line the endpoint will refuse: REFUSED")
        chat(client, agent, "an ordinary line")
        stored_vectors(url, agent, 2)  # every message's vector, stored in the background (roles: user, assistant)
        lose = "UPDATE messages SET embedding = NULL, embedding_model = NULL, created_at = now() - interval '5 minutes' WHERE agent_id = :a"
        run_sql(url, lose, {"a": uuid.UUID(agent["id"])})
        monkeypatch.setattr(llm, "embedding_refusals", {"REFUSED": 400})  # too long for it, say
        vectors = runtime(app_of(client)).turn_streams.turns.runner.vectors
        assert run_in_app(client, vectors.fill_missing) == 3
        assert run_in_app(client, vectors.fill_missing) == 0  # set aside, not failing
    missing = "SELECT content FROM messages WHERE agent_id = :a AND role IN ('user', 'assistant') AND embedding_model IS NULL"
    assert [content for (content,) in run_sql(url, missing, {"a": uuid.UUID(agent["id"])})] == [
        "a line the endpoint will refuse: REFUSED"
    ]


def test_an_endpoint_answering_too_few_vectors_is_a_clear_503(
    postgres_server: PostgresServer, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    with remote(postgres_server, llm) as (client, _):
        agent = client.post("/v1/agents", json={"name": "remote"}).json()
        monkeypatch.setattr(llm, "embedding_shortfall", 1)
        search = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "anything"})  # no vector at all
        batch = client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": [{"content": "a"}, {"content": "b"}]})
        for response, says in ((search, "answered no vectors"), (batch, "answered 1 vectors for 2 texts")):
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "embedding_unavailable" and says in response.json()["detail"]


def test_the_baselines_cohorts_cost_a_remote_embedder_one_request_each(
    postgres_server: PostgresServer, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A symmetric endpoint embeds a query as a passage: the cohorts' 70 fixed texts go in three requests (generic
    # passages, personal questions, general questions), not one request per question. The start asks for them
    # (app/readiness.py), and a recollection then asks for its query alone.
    for store in ("_centroids", "_personal_means", "_general_means"):
        monkeypatch.setattr(cohort_baseline, store, {})
    llm.embedding_requests.clear()
    with remote(postgres_server, llm) as (client, _):
        started = [len(request["input"]) for request in llm.embedding_requests]
        agent = client.post("/v1/agents", json={"name": "remote"}).json()
        client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user is planning a trip to Kyoto"})
        llm.embedding_requests.clear()
        recalled = client.post(f"/v1/agents/{agent['id']}/recollection", json={"query": "Where am I travelling to?"})
    assert recalled.status_code == 200, recalled.text
    assert started == [30, 20, 20, 1]  # the cohorts, then the warm-up's short passage
    assert [len(request["input"]) for request in llm.embedding_requests] == [1]  # the query


def test_a_server_that_does_not_normalise_its_vectors_has_them_stored_of_length_one(
    postgres_server: PostgresServer, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The search's centring and the baseline's margins take an inner product for a cosine.
    monkeypatch.setattr(llm, "embedding_length", 3.0)
    with remote(postgres_server, llm) as (client, url):
        agent = client.post("/v1/agents", json={"name": "remote"}).json()
        client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user is planning a trip to Kyoto"})
        recalled = client.post(f"/v1/agents/{agent['id']}/recollection", json={"query": "Am I planning a trip to Kyoto?"})
        lengths = run_sql(
            url, "SELECT vector_norm(embedding) FROM archival_passages WHERE agent_id = :a", {"a": uuid.UUID(agent["id"])}
        )
    assert len(lengths) == 1 and abs(lengths[0][0] - 1) < 1e-6
    assert [m["content"] for m in recalled.json()["memories"]] == ["The user is planning a trip to Kyoto"]


def test_a_fact_is_stored_when_the_baseline_cannot_be_embedded(
    postgres_server: PostgresServer, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Storing a fact lists the memories possibly about the same thing, which asks for the baseline's cohorts: an
    # endpoint failing on them costs the listing, not the fact, nor the turn.
    for store in ("_centroids", "_personal_means", "_general_means"):
        monkeypatch.setattr(cohort_baseline, store, {})
    monkeypatch.setattr(llm, "embedding_refusals", {"Photosynthesis": 503})  # in one of the generic passages
    with remote(postgres_server, llm) as (client, _):
        agent = client.post("/v1/agents", json={"name": "remote"}).json()
        llm.reset(
            tools(call("archival_memory_create", content="The user is planning a trip to Kyoto")),
            tools(call("send_message", text="Noted.")),
        )
        turn = chat(client, agent, "I am planning a trip to Kyoto")
        passages = client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]
    stored = next(e for e in turn["events"] if e["type"] == "tool_result")
    assert (turn["status"], stored["ok"]) == ("completed", True)
    assert stored["result"].startswith("Saved to archival memory")
    assert [p["content"] for p in passages] == ["The user is planning a trip to Kyoto"]
