"""An embedder wrapper that embeds each distinct text once per model and kind, kept on disk across runs, so that a
re-run of a retrieval benchmark (a calibration sweep, a ranking change) costs database time only. Embedding speed
is measured by bench/ingest.py, never through this cache."""

import hashlib
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.llm.embeddings import Embedder


class CachedEmbedder:
    def __init__(self, inner: Embedder, directory: Path):
        self.inner, self.model, self.dim, self.symmetric = inner, inner.model, inner.dim, inner.symmetric
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{inner.model.replace('/', '_')}-{inner.dim}.pkl"
        self.vectors: dict[bytes, np.ndarray] = pickle.loads(self.path.read_bytes()) if self.path.exists() else {}
        self.misses = 0

    @staticmethod
    def _key(kind: str, text: str) -> bytes:
        return hashlib.blake2b(f"{kind}\0{text}".encode(), digest_size=16).digest()

    async def _embed(self, kind: str, texts: Sequence[str]) -> list[list[float]]:
        keys = [self._key(kind, t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=False) if k not in self.vectors))
        if missing:
            if kind == "query":
                fresh = [await self.inner.embed_query(t) for t in missing]
            else:
                fresh = await self.inner.embed_passages(missing)
            for text, vector in zip(missing, fresh, strict=True):
                self.vectors[self._key(kind, text)] = np.asarray(vector, dtype=np.float32)
            self.misses += len(missing)
        return [self.vectors[k].tolist() for k in keys]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed("passage", texts)

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._embed("query", [text])
        return vector

    def save(self) -> None:
        if self.misses:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(self.vectors, protocol=pickle.HIGHEST_PROTOCOL))
            tmp.replace(self.path)
            self.misses = 0
