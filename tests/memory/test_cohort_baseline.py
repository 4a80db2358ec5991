"""The baseline's centroid (app/memory/cohort_baseline.py): embedded once per embedder model, whichever event loop asks."""

import asyncio
import uuid
from collections.abc import Sequence

from app.memory import cohort_baseline


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
