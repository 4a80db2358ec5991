"""Retrieval that does not wait for the model to remember to search: at the start of a turn the user's message is
searched in archival and recall memory, and the few hits that pass a relevance gate go into the prompt.

The gate keeps a hit when its meaning is close (cosine similarity) or when it shares enough of the query's words
(lexical coverage: the share of the query's distinct tokens found in the hit, which also works for Japanese, where
a small English embedder like MiniLM gives unrelated sentences similarities of 0.3-0.4). Both thresholds come from
bench/retrieval.py on LongMemEval: see the figures in bench/README.md."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat.repository import MessageRepository
from app.memory import lexical
from app.memory.repository import PassageRepository

MIN_SIMILARITY = 0.5
MIN_COVERAGE = 0.7
MIN_QUERY_TOKENS_FOR_COVERAGE = 2
RECOLLECTION_CHARS = 600


@dataclass
class Recollection:
    source: str  # "archival" | "conversation"
    content: str
    created_at: datetime
    similarity: float
    coverage: float


def coverage(query_tokens: set[str], search_text: str) -> float:
    if len(query_tokens) < MIN_QUERY_TOKENS_FOR_COVERAGE:
        return 0.0
    return len(query_tokens & set(search_text.split())) / len(query_tokens)


def relevant(similarity: float, lexical_coverage: float) -> bool:
    return similarity >= MIN_SIMILARITY or lexical_coverage >= MIN_COVERAGE


async def recollect(
    session: AsyncSession,
    agent_id: uuid.UUID,
    query: str,
    embedding: list[float],
    *,
    k: int,
    context_start_seq: int,
) -> list[Recollection]:
    """Relevant archival passages and earlier messages (those no longer in the context), best first."""
    terms = lexical.query_terms(query)
    query_tokens = set(terms)
    found: list[Recollection] = []
    for passage in await PassageRepository(session).hybrid_search(agent_id, embedding=embedding, terms=terms, k=k):
        cov = coverage(query_tokens, passage.passage.search_text)
        if relevant(passage.similarity, cov):
            found.append(Recollection("archival", passage.passage.content, passage.passage.created_at, passage.similarity, cov))
    messages = await MessageRepository(session).search(
        agent_id, embedding=embedding, terms=terms, k=k, below_seq=context_start_seq
    )
    for message, hit in messages:
        cov = coverage(query_tokens, message.search_text)
        if relevant(hit.similarity, cov):
            found.append(Recollection("conversation", f"{message.role}: {message.recall_text()}", message.created_at, hit.similarity, cov))
    found.sort(key=lambda r: max(r.similarity, r.coverage), reverse=True)
    return found[:k]


def render(recollections: list[Recollection]) -> str | None:
    if not recollections:
        return None
    return "\n".join(
        f"- [{r.source}, {r.created_at:%Y-%m-%d}] {r.content[:RECOLLECTION_CHARS]}" for r in recollections
    )
