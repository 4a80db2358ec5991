"""Errors mean what they say: only a failure to reach the database is "database unavailable"."""

import uuid

from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder
from app.main import create_app
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
