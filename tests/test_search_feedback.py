"""Pseudo-relevance feedback in hybrid search, with embeddings chosen by hand so the geometry is known."""

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
    for axis, value in components.items():
        vector[int(axis[1:])] = value
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


QUERY = "alpha project"
VECTORS = {
    QUERY: unit(e0=1),
    # Three notes that match the query's words; the embedder puts them on their own axis, far from the query.
    "alpha project kickoff notes": unit(e1=1, e3=0.1),
    "alpha project budget review": unit(e1=1, e4=0.1),
    "alpha project launch checklist": unit(e1=1, e5=0.1),
    # No shared word with the query, but close to those notes.
    "quarterly roadmap of the platform team": unit(e0=0.2, e1=0.98),
    # No shared word either; a little closer to the query vector alone, unrelated to the notes.
    "lemon cake recipe with poppy seeds": unit(e0=0.3, e2=0.954),
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
    own = settings.model_copy(update={"database_url": create_database(postgres_server, f"engram_feedback_{uuid.uuid4().hex[:8]}")})
    with TestClient(create_app(own, embedder=HandPlacedEmbedder()), client=LOOPBACK) as client:
        yield client


def test_hybrid_search_lifts_what_resembles_the_lexically_confirmed_hits(hand_placed: TestClient) -> None:
    agent = hand_placed.post("/v1/agents", json={"name": "feedback"}).json()
    base = f"/v1/agents/{agent['id']}/archival"
    stored = hand_placed.post(f"{base}/batch", json={"items": [{"content": t} for t in VECTORS if t != QUERY]})
    assert stored.status_code == 201 and not any(p["duplicate"] for p in stored.json()["items"])

    hits = {h["content"]: h for h in hand_placed.get(base, params={"query": QUERY, "k": 6}).json()["items"]}
    order = list(hits)
    roadmap, cake = hits["quarterly roadmap of the platform team"], hits["lemon cake recipe with poppy seeds"]
    # Neither matches a query word, so a one-pass fusion would rank them by their cosine to the query: cake first.
    assert cake["similarity"] > roadmap["similarity"]
    # The first pass's top hits (the notes, which BM25 confirms) pull the query vector towards the roadmap.
    assert order.index(roadmap["content"]) < order.index(cake["content"]), order
    assert order[-1] == cake["content"]
    assert set(order[:3]) <= {t for t in VECTORS if t.startswith("alpha")} | {roadmap["content"]}
