"""Text embedders behind one protocol: a search embeds a *query*, a stored passage or message a *passage*
(asymmetric models such as e5 prefix them differently; symmetric ones embed both alike)."""

from app.llm.embeddings.base import Embedder, EmbeddingError, EmbeddingRefused
from app.llm.embeddings.providers import build_embedder

__all__ = ["Embedder", "EmbeddingError", "EmbeddingRefused", "build_embedder"]
