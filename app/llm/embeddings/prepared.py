"""Vectors computed before a transaction opens: a caller that knows what it will embed inside one (a step's tool
calls) embeds it first, and the transaction then waits on no embedder — a remote one may take a second, and row
locks and a pooled connection would be held meanwhile."""

from collections.abc import Iterable, Sequence
from typing import Literal

from app.llm.embeddings.base import Embedder, EmbeddingError, EmbeddingRefused

Kind = Literal["passage", "query"]


class PreparedEmbedder:
    """An embedder that answers from vectors computed beforehand (`prepare`) and asks the one it wraps for any other
    text. A text whose embedding failed while preparing fails again at once, with the same error, where it is asked
    for, as does any text not prepared once the endpoint has failed otherwise than by refusing a text: the caller
    reports it as it would have, without waiting on the embedder twice."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner = embedder
        self.model, self.dim, self.symmetric = embedder.model, embedder.dim, embedder.symmetric
        self.vectors: dict[tuple[Kind, str], list[float]] = {}
        self.failures: dict[tuple[Kind, str], EmbeddingError] = {}
        self.down: EmbeddingError | None = None  # the endpoint failed otherwise than by refusing a text

    def key(self, kind: Kind, text: str) -> tuple[Kind, str]:
        return ("passage" if self.symmetric else kind), text  # a symmetric model's query vector is its passage vector

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [self.key("passage", text) for text in texts]
        self._raise_failure(keys)
        if all(key in self.vectors for key in keys):
            return [self.vectors[key] for key in keys]
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        key = self.key("query", text)
        self._raise_failure([key])
        return self.vectors[key] if key in self.vectors else await self.inner.embed_query(text)

    def _raise_failure(self, keys: list[tuple[Kind, str]]) -> None:
        for key in keys:
            if key in self.failures:
                raise self.failures[key]
            if self.down is not None and key not in self.vectors:  # not prepared: the endpoint is not asked again
                raise self.down

    async def fill(self, kind: Kind, texts: list[str]) -> None:
        """Embed `texts` as `kind`: passages in one request, queries one by one. An endpoint that refuses a request
        of several texts is asked for each alone, so that a text it cannot take fails only its own call; an endpoint
        that fails otherwise (down, timing out) is not asked again: every text still to embed fails with it."""
        if kind == "query" and len(texts) > 1:
            for text in texts:
                await self.fill(kind, [text])
            return
        if self.down is not None:
            self.failures.update((self.key(kind, text), self.down) for text in texts)
            return
        try:
            vectors = await (self.inner.embed_passages(texts) if kind == "passage" else self._query(texts[0]))
        except EmbeddingRefused as exc:
            if len(texts) > 1:
                for text in texts:
                    await self.fill(kind, [text])
            else:
                self.failures[self.key(kind, texts[0])] = exc
            return
        except EmbeddingError as exc:
            self.down = exc
            self.failures.update((self.key(kind, text), exc) for text in texts)
            return
        self.vectors.update((self.key(kind, text), vector) for text, vector in zip(texts, vectors, strict=True))

    async def _query(self, text: str) -> list[list[float]]:
        return [await self.inner.embed_query(text)]


async def prepare(embedder: Embedder, passages: Iterable[str] = (), queries: Iterable[str] = ()) -> Embedder:
    """`embedder`, holding the vectors of `passages` (one request) and `queries` computed now; `embedder` itself when
    there is nothing to compute. A symmetric embedder embeds both in one request."""
    passages, queries = list(dict.fromkeys(passages)), list(dict.fromkeys(queries))
    if not (passages or queries):
        return embedder
    prepared = PreparedEmbedder(embedder)
    if embedder.symmetric:
        await prepared.fill("passage", list(dict.fromkeys(passages + queries)))
    else:
        if passages:
            await prepared.fill("passage", passages)
        if queries:
            await prepared.fill("query", queries)
    return prepared
