"""Metrics, request ids, JSON logs and request limits."""

import json
import logging
import re

from fastapi.testclient import TestClient

from app import __version__
from app.llm.embeddings import Embedder
from app.observability import JsonFormatter, request_id_var
from app.runtime import runtime
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.chat import chat
from tests.support.metrics import metric
from tests.support.service import admin, app_of, tenant_with_key


def test_metrics_count_turns_tools_and_llm_calls(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    before = client.get("/metrics").text
    llm.reset(tools(call("archival_memory_search", query="x")), tools(call("nope")), tools(call("send_message", text="hi")))
    chat(client, agent, "hello")
    after = client.get("/metrics")
    assert after.status_code == 200 and after.headers["content-type"].startswith("text/plain")
    text = after.text
    assert (
        metric(text, "engram_turns_total", stop_reason="end_turn")
        == metric(before, "engram_turns_total", stop_reason="end_turn") + 1
    )
    assert metric(text, "engram_tool_calls_total", tool="unknown", ok="false") >= 1
    assert metric(text, "engram_tool_calls_total", tool="archival_memory_search", ok="true") >= 1
    assert (
        metric(text, "engram_llm_request_seconds_count", outcome="ok")
        >= metric(before, "engram_llm_request_seconds_count", outcome="ok") + 3
    )
    assert metric(text, "engram_search_seconds_count", memory="archival_passages") >= 1
    assert metric(text, "engram_turn_lock_wait_seconds_count", outcome="acquired") >= 1
    assert metric(text, "engram_http_requests_total", method="POST", route="/v1/agents/{agent_id}/chat", status="200") >= 1


def test_request_ids_are_returned_and_reused(client: TestClient) -> None:
    generated = client.get("/healthz").headers["x-request-id"]
    assert len(generated) == 32
    assert client.get("/healthz", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"] == "abc-123"
    assert client.get("/healthz", headers={"X-Request-ID": "bad id\nwith newline"}).headers["x-request-id"] != "bad id"


def test_request_bodies_are_capped(client: TestClient, agent: dict) -> None:
    huge = {"content": "x" * 1_100_000}
    response = client.post(f"/v1/agents/{agent['id']}/archival", json=huge)
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
    assert response.headers["x-request-id"]
    chunked = client.post(
        f"/v1/agents/{agent['id']}/archival",
        content=(b"x" * 100_000 for _ in range(12)),
        headers={"content-type": "application/json"},
    )
    assert chunked.status_code == 413 and chunked.json()["error"] == "payload_too_large"
    too_long = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "x" * 40_000})
    assert too_long.status_code == 422


def test_json_logs_carry_the_request_id() -> None:
    token = request_id_var.set("req-42")
    try:
        record = logging.LogRecord("engram.turn", logging.INFO, __file__, 1, "turn %s done", ("t1",), None)
        entry = json.loads(JsonFormatter().format(record))
    finally:
        request_id_var.reset(token)
    assert entry == {**entry, "level": "info", "logger": "engram.turn", "message": "turn t1 done", "request_id": "req-42"}


def test_api_docs_work_offline(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html.text) + re.findall(r"""url: ["']([^"']+)["']""", html.text)
        assert assets and not [a for a in assets if "://" in a], assets  # nothing from another host
        for asset in assets:
            assert client.get(asset).status_code == 200, asset


def test_metrics_need_the_admin_key_once_keys_are_configured(keyed: TestClient) -> None:
    # They span every tenant: a tenant's key, or none, reads nothing (loopback without keys: `client` above).
    _, key = tenant_with_key(keyed, "metrics reader")
    assert keyed.get("/metrics").status_code == 401
    refused = keyed.get("/metrics", headers={"Authorization": f"Bearer {key}"})
    assert refused.status_code == 403 and "admin key" in refused.json()["detail"]
    scraped = keyed.get("/metrics", headers=admin())
    assert scraped.status_code == 200 and "engram_turns_total" in scraped.text


def test_service_says_which_models_serve_it(client: TestClient, embedder: Embedder) -> None:
    info = client.get("/v1/service").json()
    assert info == {
        "version": __version__,
        "llm": {"model": runtime(app_of(client)).settings.default_llm_model, "demo": False},
        "embedding_model": embedder.model,
        "embedding_dim": embedder.dim,
    }


def test_metrics_count_recollections_by_caller_and_whether_the_gate_let_memories_through(
    client: TestClient, agent: dict, llm: ScriptedLLM
) -> None:
    base = f"/v1/agents/{agent['id']}"
    before = client.get("/metrics").text
    assert client.post(f"{base}/recollection", json={"query": "Where does my sister live?"}).status_code == 200
    assert client.post(f"{base}/archival", json={"content": "The user's sister lives in Osaka."}).status_code == 201
    for query in ("Where does my sister live?", "What is the capital of Australia?"):
        assert client.post(f"{base}/recollection", json={"query": query}).status_code == 200
    llm.reset(tools(call("send_message", text="In Osaka.")))
    chat(client, agent, "Which city is my sister in?")
    after = client.get("/metrics").text

    def counted(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert counted("engram_recollections_total", caller="api", outcome="memories") == 1
    assert counted("engram_recollections_total", caller="api", outcome="gated") == 1
    assert counted("engram_recollections_total", caller="api", outcome="empty") == 1  # before the agent had memory
    assert counted("engram_recollections_total", caller="chat", outcome="memories") == 1
    assert counted("engram_recollected_memories_sum", caller="api") == 1  # the one passage
