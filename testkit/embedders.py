"""Embedders that the tests and the benchmarks build from a real one."""

import math
from collections.abc import Sequence

from app.llm.embeddings import Embedder


class Wrapping:
    """`embedder` itself: what it is and what it embeds; a subclass changes what it needs."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner, self.model, self.dim, self.symmetric = embedder, embedder.model, embedder.dim, embedder.symmetric

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)


class Compressed(Wrapping):
    """`embedder` with every cosine moved halfway to 1 (cos' = (1 + cos) / 2: its vector and a constant component, in
    equal parts): a model whose texts all sit closer together, as models differ in how they spread their cosines."""

    def __init__(self, embedder: Embedder) -> None:
        super().__init__(embedder)
        self.model, self.dim = f"{embedder.model}-compressed", embedder.dim + 1

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._compressed(v) for v in await self.inner.embed_passages(texts)]

    async def embed_query(self, text: str) -> list[float]:
        return self._compressed(await self.inner.embed_query(text))

    @staticmethod
    def _compressed(vector: list[float]) -> list[float]:
        return [x * math.sqrt(0.5) for x in vector] + [math.sqrt(0.5)]
