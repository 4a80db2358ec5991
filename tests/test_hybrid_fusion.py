"""Hybrid search ranking, with embeddings placed by hand so the geometry is known: how the cosine and BM25 sides
are fused, through the real SQL on a real PostgreSQL."""

import math
import uuid
from collections.abc import Iterator, Sequence

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import E5_DIM, Settings
from tests.conftest import LOOPBACK, create_database


def unit(**components: float) -> list[float]:
    """A vector with the given components on axes named e0, e1, … (normalised)."""
    vector = [0.0] * E5_DIM
    for name, value in components.items():
        vector[int(name[1:])] = value
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


QUERY = "weekend plans of the user"
VECTORS = {
    QUERY: unit(e0=1.0),
    # Every query term, rare ones included, and fairly close in meaning.
    "weekend plans: the user visits Kyoto": unit(e0=0.7, e1=0.714),
    # No query word, but the closest in meaning.
    "Saturday: hiking with Ken in the mountains": unit(e0=0.9, e2=0.436),
    # Only "user", a word every note shares, and far in meaning.
    **{note: unit(e0=0.3, e3=0.954) for note in (
        "the user likes green tea", "the user lives in Osaka", "the user bought a kettle", "the user reads at night",
    )},
}


class HandPlacedEmbedder:
    model, dim = "hand-placed", E5_DIM

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [VECTORS[t] for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return VECTORS[text]


@pytest.fixture
def hand_placed(postgres_server: object, settings: Settings) -> Iterator[TestClient]:
    # A database of its own: its vectors belong to the hand-placed "model", not to the shared test database's.
    own = settings.model_copy(update={"database_url": create_database(postgres_server, f"engram_fusion_{uuid.uuid4().hex[:8]}")})
    with TestClient(create_app(own, embedder=HandPlacedEmbedder()), client=LOOPBACK) as client:
        yield client


def search(client: TestClient, base: str, mode: str) -> list[str]:
    response = client.get(base, params={"query": QUERY, "k": 10, "mode": mode})
    assert response.status_code == 200
    return [h["content"] for h in response.json()["items"]]


def test_weak_lexical_evidence_does_not_outrank_meaning(hand_placed: TestClient) -> None:
    agent = hand_placed.post("/v1/agents", json={"name": "fusion"}).json()
    base = f"/v1/agents/{agent['id']}/archival"
    assert hand_placed.post(f"{base}/batch", json={"items": [{"content": t} for t in VECTORS if t != QUERY]}).status_code == 201

    exact, hiking = "weekend plans: the user visits Kyoto", "Saturday: hiking with Ken in the mountains"
    order = search(hand_placed, base, "hybrid")
    # All of the query's words and close in meaning: first. Then the closest in meaning, although it shares no
    # word: the notes that share only the common "user" are weak lexical evidence, not the best there is.
    assert order[:2] == [exact, hiking], order
    assert len(order) == 6
    assert search(hand_placed, base, "vector")[0] == hiking
    assert search(hand_placed, base, "text")[0] == exact and hiking not in search(hand_placed, base, "text")


def test_an_empty_memory_and_a_wordless_query_find_nothing_or_by_meaning(hand_placed: TestClient) -> None:
    agent = hand_placed.post("/v1/agents", json={"name": "empty"}).json()
    base = f"/v1/agents/{agent['id']}/archival"
    for mode in ("hybrid", "vector", "text"):
        assert search(hand_placed, base, mode) == []
