"""Vectors computed before a transaction opens: a caller that knows what it will embed inside one (a step's tool
calls) embeds it first, and the transaction then waits on no embedder — a remote one may take a second, and row
locks and a pooled connection would be held meanwhile."""

from collections.abc import Iterable, Sequence

from app.llm.embeddings.base import Embedder, EmbeddingError


class PreparedEmbedder:
    """An embedder that answers from vectors computed beforehand (`prepare`) and asks the one it wraps for any other
    text. A text whose embedding failed while preparing fails again at once, with the same error, where it is asked
    for: the caller reports it as it would have, without waiting on the embedder twice."""

    def __init__(
        self,
        embedder: Embedder,
        passages: dict[str, list[float]],
        queries: dict[str, list[float]],
        failed: EmbeddingError | None = None,
    ) -> None:
        self.inner = embedder
        self.model, self.dim, self.symmetric = embedder.model, embedder.dim, embedder.symmetric
        self.passages, self.queries, self.failed = passages, queries, failed

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if all(text in self.passages for text in texts):
            return [self.passages[text] for text in texts]
        self._raise_failure()
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        if text in self.queries:
            return self.queries[text]
        self._raise_failure()
        return await self.inner.embed_query(text)

    def _raise_failure(self) -> None:
        if self.failed is not None:
            raise self.failed


async def prepare(embedder: Embedder, passages: Iterable[str] = (), queries: Iterable[str] = ()) -> Embedder:
    """`embedder`, holding the vectors of `passages` (one batch) and `queries` computed now; `embedder` itself when
    there is nothing to compute. A symmetric embedder embeds both in one batch."""
    passages, queries = list(dict.fromkeys(passages)), list(dict.fromkeys(queries))
    if not (passages or queries):
        return embedder
    try:
        if embedder.symmetric:
            texts = list(dict.fromkeys(passages + queries))
            vectors = dict(zip(texts, await embedder.embed_passages(texts), strict=True))
            return PreparedEmbedder(embedder, vectors, {text: vectors[text] for text in queries})
        passage_vectors = await embedder.embed_passages(passages) if passages else []
        query_vectors = [await embedder.embed_query(text) for text in queries]
    except EmbeddingError as exc:
        return PreparedEmbedder(embedder, {}, {}, failed=exc)
    return PreparedEmbedder(
        embedder, dict(zip(passages, passage_vectors, strict=True)), dict(zip(queries, query_vectors, strict=True))
    )
