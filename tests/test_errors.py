"""Errors mean what they say: only a failure to reach the database is "database unavailable"."""

from fastapi import FastAPI

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from tests.conftest import checked_client


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
