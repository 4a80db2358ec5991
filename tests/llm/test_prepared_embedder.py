"""What a step's embedder does once the endpoint has failed while its texts were prepared (app/llm/embeddings/prepared.py):
the texts fail at once, with the endpoint's error, and the endpoint is not asked again."""

import asyncio
from collections.abc import Sequence

import pytest

from app.llm.embeddings import EmbeddingError
from app.llm.embeddings.prepared import prepare


class DownEndpoint:
    """An endpoint that fails every request (counted)."""

    model, dim, symmetric = "down", 3, False

    def __init__(self) -> None:
        self.asked = 0

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.asked += 1
        raise EmbeddingError("the embedding endpoint is unreachable")

    async def embed_query(self, text: str) -> list[float]:
        self.asked += 1
        raise EmbeddingError("the embedding endpoint is unreachable")


def test_an_endpoint_that_failed_while_preparing_is_not_asked_again() -> None:
    endpoint = DownEndpoint()
    prepared = asyncio.run(prepare(endpoint, passages=["a fact", "another fact"], queries=["a question", "another"]))
    assert endpoint.asked == 1  # the passages' request; the queries were not tried
    for embed in (
        lambda: prepared.embed_passages(["a fact"]),
        lambda: prepared.embed_query("another"),
        lambda: prepared.embed_passages(["a text never prepared"]),
    ):
        with pytest.raises(EmbeddingError, match="unreachable"):
            asyncio.run(embed())
    assert endpoint.asked == 1
