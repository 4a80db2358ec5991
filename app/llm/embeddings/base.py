"""The embedder protocol, its error, and the single-worker executor that keeps local models off the event loop."""

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from app.errors import ServiceUnavailable

# Bounds the model work one text can cost (e5 embeds long texts window by window rather than truncating them).
MAX_EMBED_CHARS = 4000
# Work per turn on the passage lane: a batch goes through in slices of about this many characters (at least one
# text), so that other passages (a turn's message vectors, a small batch) wait for at most one slice (~0.3 s of
# English, ~0.7 s of Japanese on 2 cores), never for a whole bulk import. The model costs the same per text in a
# slice of one as in a slice of many. Queries have a lane of their own (LocalModelEmbedder).
SLICE_CHARS = 1000
# A passage slice waits for the queries being embedded (sharing the cores doubles a query's time: 12 → 26 ms for a
# question on 2 cores), though never longer than this, so that a stream of searches cannot starve an import.
QUERY_PRIORITY_SECONDS = 0.05


class EmbeddingError(ServiceUnavailable):
    code = "embedding_unavailable"


class EmbeddingRefused(EmbeddingError):
    """The embedding endpoint refused the input itself (400, 413, 422): sending it again cannot succeed."""


class Embedder(Protocol):
    model: str  # stored with every vector: vectors of different models are never compared
    dim: int

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


Encode = Callable[[list[str]], Sequence[Sequence[float]]]


class LocalModelEmbedder:
    """Runs a blocking in-process model off the event loop (the native code releases the GIL), in two lanes of one
    thread each: passages, fed slice by slice, and queries. Calls of a lane queue instead of oversubscribing the
    cores, each of which the model already uses; a query never queues behind passages (a bulk import's slice of
    long texts takes most of a second), and no passage slice starts while a query is being embedded (for at most
    QUERY_PRIORITY_SECONDS): a query shares the cores only with a slice already under way."""

    model: str
    dim: int

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._queries = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-query")
        self._queries_asked: set[asyncio.Future[list[float]]] = set()  # waiting for the lane, or in it
        self._waiting_queries: list[tuple[str, asyncio.Future[list[float]]]] = []
        self._query_batches: asyncio.Future[None] | None = None

    def _encode_passages(self, texts: list[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError

    def _encode_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError

    async def _run(self, lane: ThreadPoolExecutor, encode: Encode, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        loop, out = asyncio.get_running_loop(), []
        for piece in _slices([t[:MAX_EMBED_CHARS] for t in texts]):
            if lane is self._pool and (queries := [q for q in self._queries_asked if q.get_loop() is loop]):
                await asyncio.wait(queries, timeout=QUERY_PRIORITY_SECONDS)
            work = loop.run_in_executor(lane, encode, piece)
            out.extend(np.asarray(await work, dtype=np.float32).tolist())
        return out

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._run(self._pool, self._encode_passages, texts)

    async def embed_query(self, text: str) -> list[float]:
        """Queries that arrive while others are embedded go together in the next call: one pass of the model for
        all of them (8 questions: 59 against 68 ms one by one on 2 cores; the same vectors, bit for bit)."""
        loop = asyncio.get_running_loop()
        asked: asyncio.Future[list[float]] = loop.create_future()
        self._queries_asked.add(asked)
        asked.add_done_callback(self._queries_asked.discard)
        self._waiting_queries.append((text, asked))
        batches = self._query_batches
        if batches is None or batches.done() or batches.get_loop() is not loop:  # another loop's: closed with it
            self._query_batches = asyncio.ensure_future(self._embed_waiting_queries())
        return await asked

    async def _embed_waiting_queries(self) -> None:
        loop, batch = asyncio.get_running_loop(), []
        try:
            while self._waiting_queries:
                # done: its caller was cancelled; of another loop: closed, and its caller with it
                batch = [(text, asked) for text, asked in self._waiting_queries if not asked.done() and asked.get_loop() is loop]
                self._waiting_queries = []
                try:
                    vectors = await self._run(self._queries, self._encode_queries, [text for text, _ in batch])
                except Exception as exc:
                    for _, asked in batch:
                        if not asked.done():
                            asked.set_exception(exc)
                    continue
                for (_, asked), vector in zip(batch, vectors, strict=True):
                    if not asked.done():
                        asked.set_result(vector)
        finally:  # cancelled (the loop is closing): no caller may wait for good
            for _, asked in batch + self._waiting_queries:
                if asked.get_loop() is loop:
                    asked.cancel()
            self._waiting_queries = []


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
