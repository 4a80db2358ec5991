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
    long texts takes most of a second), it shares the cores with them for the few milliseconds it takes."""

    model: str
    dim: int

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._queries = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-query")

    def _encode_passages(self, texts: list[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError

    def _encode_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError

    async def _run(self, lane: ThreadPoolExecutor, encode: Encode, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        loop, out = asyncio.get_running_loop(), []
        for piece in _slices([t[:MAX_EMBED_CHARS] for t in texts]):
            out.extend(np.asarray(await loop.run_in_executor(lane, encode, piece), dtype=np.float32).tolist())
        return out

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._run(self._pool, self._encode_passages, texts)

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._run(self._queries, self._encode_queries, [text])
        return vector


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
