"""Errors mean what they say: only a failure to reach the database is "database unavailable"."""

import uuid

from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder
from app.main import create_app
from app.request_body import NUL_REFUSED, nul_at
from app.settings import Settings
from tests.support.service import checked_client


def test_a_timeout_that_is_not_the_database_is_an_internal_error(settings: Settings, embedder: Embedder) -> None:
    app: FastAPI = create_app(settings, embedder=embedder)

    async def slow_dependency() -> None:
        raise TimeoutError("some upstream took too long")  # an OSError, but no database in sight

    app.add_api_route("/test-only/timeout", slow_dependency)
    with checked_client(app) as client:
        response = client.get("/test-only/timeout")
        assert response.status_code == 500 and response.json()["error"] == "internal_error"
        assert "retry-after" not in response.headers
        client.statuses.clear()  # the one 500 this test asks for


def test_a_body_that_is_not_json_says_what_to_send(client: TestClient, agent: dict) -> None:
    broken = client.post("/v1/agents", content=b'{"name": "x",}', headers={"Content-Type": "application/json"})
    assert broken.status_code == 422
    assert broken.json()["error"] == "invalid_request"
    assert "at character 13" in broken.json()["detail"] and "Content-Type: application/json" in broken.json()["detail"]
    for headers in ({}, {"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"}):
        unlabelled = client.post(f"/v1/agents/{agent['id']}/chat", content=b'{"message": "hi"}', headers=headers)
        assert unlabelled.status_code == 415, (headers, unlabelled.text)
        assert unlabelled.json() == {
            "error": "unsupported_media_type",
            "detail": "the body was not sent as JSON: send a JSON object with the header Content-Type: application/json",
        }
    # A JSON media type with parameters or a +json suffix is JSON.
    named = f'{{"name": "labelled {uuid.uuid4()}"}}'.encode()
    labelled = client.post("/v1/agents", content=named, headers={"Content-Type": "application/json; charset=utf-8"})
    assert labelled.status_code == 201
    assert (
        client.post("/v1/agents", content=b'{"name": 1}', headers={"Content-Type": "application/vnd.api+json"}).status_code == 422
    )


def test_each_complaint_is_said_once(client: TestClient, agent: dict) -> None:
    empty = client.post("/v1/chat/completions", json={"model": agent["id"], "messages": []})
    assert empty.status_code == 400
    assert empty.json()["error"]["message"] == "messages: List should have at least 1 item after validation, not 0"


def test_a_body_that_is_not_utf8_is_a_422_naming_the_byte(client: TestClient, agent: dict) -> None:
    latin1 = client.post("/v1/agents", content=b'{"name": "caf\xe9"}', headers={"Content-Type": "application/json"})
    assert latin1.status_code == 422, latin1.text
    assert latin1.json() == {
        "error": "invalid_request",
        "detail": "the body is not valid UTF-8 (byte 0xe9 at offset 13: invalid continuation byte); JSON is sent in UTF-8",
    }
    # OpenAI's routes say it in OpenAI's shape (as a 400, as OpenAI does for invalid input).
    openai = client.post("/v1/chat/completions", content=b'{"model": "\xff"}', headers={"Content-Type": "application/json"})
    assert openai.status_code == 400 and openai.json()["error"]["code"] == "invalid_request", openai.text
    assert "not valid UTF-8 (byte 0xff" in openai.json()["error"]["message"]


def test_text_with_a_nul_character_is_a_422_naming_where_it_is(client: TestClient, agent: dict) -> None:
    a = agent["id"]
    bodies = [
        ("POST", "/v1/agents", {"name": "Ai\u0000ko"}, "name: must not contain a NUL character (\\u0000)"),
        ("POST", f"/v1/agents/{a}/archival", {"content": "x\u0000"}, "content: must not contain"),
        (
            "POST",
            f"/v1/agents/{a}/archival",
            {"content": "x", "tags": ["a", "b\u0000"]},
            "tags: must not contain a NUL character (\\u0000); tags.1 does",
        ),
        (
            "POST",
            f"/v1/agents/{a}/archival/batch",
            {"items": [{"content": "one"}, {"content": "two"}, {"content": "thr\u0000ee"}]},
            "items.2.content: must not contain",
        ),
        ("PUT", f"/v1/agents/{a}/memory/human", {"value": "\u0000"}, "value: must not contain"),
        ("POST", f"/v1/agents/{a}/messages", {"messages": [{"role": "user", "content": "hi\u0000"}]}, "messages.0.content"),
        ("POST", f"/v1/agents/{a}/recollection", {"query": "where\u0000"}, "query: must not contain"),
        ("POST", f"/v1/agents/{a}/chat", {"message": "hello\u0000"}, "message: must not contain"),
        ("POST", f"/letta/v1/agents/agent-{a}/archival-memory", {"text": "x\u0000"}, "text: must not contain"),
    ]
    for method, path, body, named in bodies:
        response = client.request(method, path, json=body)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["error"] == "invalid_request" and named in response.json()["detail"], response.json()
        assert "UTF8" not in response.json()["detail"]  # PostgreSQL's own words are not the answer
    openai = client.post("/v1/chat/completions", json={"model": a, "messages": [{"role": "user", "content": "hi\u0000"}]})
    assert openai.status_code == 400 and "messages.0.content" in openai.json()["error"]["message"], openai.text
    parts = [{"type": "text", "text": "hi\u0000"}]
    openai = client.post("/v1/chat/completions", json={"model": a, "messages": [{"role": "user", "content": parts}]})
    assert openai.status_code == 400 and "messages.0.content" in openai.json()["error"]["message"], openai.text
    imported = client.post(
        f"/v1/agents/{a}/archival/import",
        content=b'{"content": "ok"}\n{"content": "n\\u0000"}\n',
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert imported.status_code == 422 and "line 2: content: must not contain" in imported.json()["detail"]
    exported = client.get(f"/v1/agents/{a}/export").json()
    exported["blocks"][1]["value"] = "nul\u0000"
    reimported = client.post("/v1/agents/import", json=exported, params={"name": f"copy {uuid.uuid4()}"})
    assert reimported.status_code == 422 and reimported.json()["detail"] == "blocks.1.value: " + NUL_REFUSED, reimported.text
    assert client.get(f"/v1/agents/{a}/archival").json()["items"] == []
    assert client.get(f"/v1/agents/{a}/messages").json()["items"] == []


def test_a_nul_deep_in_a_document_is_found_without_recursion() -> None:
    # a document nested deeper than Python's recursion limit, as an import may be, is refused by its NUL, not a 500
    document: object = "x\x00"
    for _ in range(5000):
        document = {"a": document}
    where = nul_at(document)
    assert where is not None and where.count("a") == 5000
    assert nul_at({"items": [{"content": "ok"}, {"content": "x\x00"}]}) == "items.1.content"
