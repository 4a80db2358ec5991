"""Ready means ready (issue 54): `/readyz` answers ready only once what the first requests would compute is computed
(app/readiness.py): the recollection gate's cohorts, embedded by the embedder. Meanwhile, and while an embedding
endpoint is down, the service serves and `/readyz` says why it is not ready."""

import asyncio
import threading
import time
import uuid
from collections.abc import Sequence

import pytest
from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer

from app import db, readiness
from app.llm.embeddings import Embedder
from app.main import create_app
from app.memory.search import baseline as cohort_baseline
from app.settings import Settings
from testkit.scripted_llm import EMBEDDING_DIM, ScriptedLLM
from tests.support.database import create_database
from tests.support.service import checked_client, scripted_settings


@pytest.fixture
def cohorts_not_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process that has just started: no model's cohorts embedded yet."""
    for store in ("_centroids", "_personal_means", "_general_means"):
        monkeypatch.setattr(cohort_baseline, store, {})


class HeldEmbedder:
    """The test's embedder, whose queries wait until the test lets them go (a warm-up that takes its time)."""

    def __init__(self, embedder: Embedder, gate: threading.Event) -> None:
        self.inner, self.gate = embedder, gate
        self.model, self.dim, self.symmetric = embedder.model, embedder.dim, embedder.symmetric

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        while not self.gate.is_set():  # not in a thread: the 40 questions would hold the loop's default executor
            await asyncio.sleep(0.01)
        return await self.inner.embed_query(text)


def ready_when_warm(client: TestClient, embedder: Embedder) -> dict:
    """/readyz polled until it answers ready: every answer of ready finds the cohorts embedded. Its last answer."""
    deadline = time.monotonic() + 60
    while (answer := client.get("/readyz")).status_code != 200:
        assert answer.status_code == 503 and answer.json()["error"] == "not_ready", answer.text
        assert time.monotonic() < deadline, f"never ready: {answer.json()}"
        time.sleep(0.1)
    assert cohort_baseline.cohorts_embedded(embedder)
    return answer.json()


@pytest.mark.usefixtures("cohorts_not_embedded")
def test_ready_once_started_means_the_cohorts_are_embedded(settings: Settings, embedder: Embedder) -> None:
    assert not cohort_baseline.cohorts_embedded(embedder)
    with checked_client(create_app(settings, embedder=embedder)) as client:  # the start waits for the warm-up
        assert ready_when_warm(client, embedder) == {"status": "ready"}


@pytest.mark.usefixtures("cohorts_not_embedded")
def test_not_ready_while_warming_up_and_ready_once_warm(
    settings: Settings, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readiness, "WAIT_SECONDS", 0.1)  # the start stops waiting for the warm-up and listens
    gate = threading.Event()
    held = HeldEmbedder(embedder, gate)
    with checked_client(create_app(settings, embedder=held)) as client:
        answer = client.get("/readyz")
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
        assert answer.json() == {"error": "not_ready", "detail": "warming up: embedding the recollection gate's cohorts"}
        assert not cohort_baseline.cohorts_embedded(embedder)
        agents = client.get("/v1/agents")  # served meanwhile
        assert agents.status_code == 200
        gate.set()
        assert ready_when_warm(client, embedder) == {"status": "ready"}


@pytest.mark.usefixtures("cohorts_not_embedded")
def test_an_embedding_endpoint_down_at_the_start_leaves_the_service_up_and_not_ready_until_it_is_back(
    postgres_server: PostgresServer, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = create_database(postgres_server, f"engram_ready_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, EMBEDDING_DIM)
    hashed = {"embedding_provider": "openai", "embedding_model": "hashed", "embedding_dim": EMBEDDING_DIM}
    monkeypatch.setattr(llm, "embedding_refusals", {"": 503})  # every request: the endpoint is down
    app = create_app(scripted_settings(url, llm, embedding_base_url=llm.url, **hashed))
    with checked_client(app) as client:
        embedder: Embedder = app.state.runtime.embedder
        answer = client.get("/readyz")
        assert answer.status_code == 503
        assert answer.json()["detail"].startswith("embedder unavailable, retrying: EmbeddingError: embedding endpoint failed")
        assert not cohort_baseline.cohorts_embedded(embedder)
        assert client.post("/v1/agents", json={"name": "early"}).status_code == 201  # served meanwhile
        monkeypatch.setattr(llm, "embedding_refusals", {})  # back: the next attempt warms up
        assert ready_when_warm(client, embedder) == {"status": "ready"}
