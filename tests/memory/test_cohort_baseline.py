"""The baseline's centroid (app/memory/search/baseline.py): embedded once per embedder model, whichever event loop asks;
margins over it read on the model's own scale."""

import asyncio
import uuid
from collections.abc import Sequence

from pgserver.postgres_server import PostgresServer

from app import db
from app.llm.embeddings import Embedder
from app.main import create_app
from app.memory.search import baseline as cohort_baseline
from testkit.embedders import Compressed
from testkit.scripted_llm import ScriptedLLM
from tests.support.database import create_database
from tests.support.service import checked_client, scripted_settings


class SlowEmbedder:
    """Takes a moment over the generic passages, so that concurrent callers contend for the centroid."""

    dim = 4
    symmetric = True

    def __init__(self) -> None:
        self.model = f"slow-{uuid.uuid4().hex[:8]}"
        self.calls = 0

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        await asyncio.sleep(0.01)
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    async def embed_query(self, text: str) -> list[float]:
        raise AssertionError("the centroid embeds passages only")


async def contend(embedder: SlowEmbedder) -> None:
    first, second = await asyncio.gather(cohort_baseline.centroid(embedder), cohort_baseline.centroid(embedder))
    assert first is second


def test_the_centroid_is_embedded_once_per_model_in_every_event_loop() -> None:
    # One process may run its services on more than one loop in turn (tests, the CLI's commands): a lock bound to
    # the first loop that contended for it fails in the next one.
    for _ in range(2):
        embedder = SlowEmbedder()
        asyncio.run(contend(embedder))
        assert embedder.calls == 1


def test_the_gate_reads_margins_on_the_models_own_scale(
    postgres_server: PostgresServer, embedder: Embedder, llm: ScriptedLLM
) -> None:
    # Its margins are half e5's, and so is the room between its unrelated texts' cosine and an identical text's: on
    # that scale the gate lets in what it lets in with e5, and keeps out what it keeps out.
    compressed = Compressed(embedder)
    recalled: dict[str, dict[str, list[str]]] = {}
    for model in (embedder, compressed):  # a database holds one model's vectors: each gets its own
        url = create_database(postgres_server, f"engram_scale_{uuid.uuid4().hex[:8]}")
        db.run_migrations(url, model.dim)
        with checked_client(create_app(scripted_settings(url, llm), embedder=model)) as client:
            agent = client.post("/v1/agents", json={"name": f"scale {uuid.uuid4().hex[:8]}"}).json()
            facts = [{"content": "The user's sister lives in Osaka."}, {"content": "The user plays the cello on Sundays."}]
            assert client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": facts}).status_code == 201
            recalled[model.model] = {
                question: [
                    m["content"]
                    for m in client.post(
                        f"/v1/agents/{agent['id']}/recollection", json={"query": question, "include_core": False}
                    ).json()["memories"]
                ]
                for question in ("Which city is my sister in?", "What is the capital of Australia?")
            }
    assert recalled[embedder.model]["Which city is my sister in?"][0] == "The user's sister lives in Osaka."
    assert recalled[embedder.model]["What is the capital of Australia?"] == []
    assert recalled[compressed.model] == recalled[embedder.model]


def test_e5_reads_its_own_margins_as_they_are(embedder: Embedder) -> None:
    # REFERENCE_ROOM is e5's room, measured on the cohorts: every threshold on margins was chosen on e5's scale.
    base = asyncio.run(cohort_baseline.baseline(embedder, asyncio.run(embedder.embed_query("Where does my sister live?"))))
    assert abs(base.scale - 1) < 1e-4
