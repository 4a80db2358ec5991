"""Retrieval that does not wait for the model to remember to search: at the start of a turn the user's message is
searched in archival and recall memory, and the few hits that pass a relevance gate go into the prompt.

The gate keeps a hit when its meaning is close or when it shares enough of the query's words. Close: its cosine
similarity stands out from the query's baseline (the margin over the query's similarity to generic text, see
app/memory/background.py; a raw cosine cannot tell, since multilingual-e5 scores unrelated texts 0.75-0.85).
Words: lexical coverage, the share of the query's distinct tokens found in the hit (bigrams for Japanese). Both
thresholds come from bench/retrieval.py on LongMemEval and from the Japanese set: see bench/README.md."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from app.llm.embeddings import Embedder
from app.memory import lexical
from app.memory.background import baseline
from app.memory.service import ArchivalMemory, RecallMemory

MIN_MARGIN = 0.08
MIN_COVERAGE = 0.7
MIN_QUERY_TOKENS_FOR_COVERAGE = 2
RECOLLECTION_CHARS = 600


@dataclass
class Recollection:
    source: str  # "archival" | "conversation"
    content: str
    created_at: datetime
    similarity: float
    margin: float
    coverage: float


def coverage(query_tokens: set[str], search_text: str) -> float:
    if len(query_tokens) < MIN_QUERY_TOKENS_FOR_COVERAGE:
        return 0.0
    return len(query_tokens & set(search_text.split())) / len(query_tokens)


def relevant(margin: float, lexical_coverage: float) -> bool:
    return margin >= MIN_MARGIN or lexical_coverage >= MIN_COVERAGE


async def recollect(
    session: AsyncSession,
    agent_id: uuid.UUID,
    query: str,
    embedding: list[float],
    *,
    embedder: Embedder,
    k: int,
    context_start_seq: int,
) -> list[Recollection]:
    """Relevant archival passages and earlier messages (those no longer in the context), best first."""
    query_tokens = set(lexical.query_terms(query))
    base = await baseline(embedder, embedding)
    passages = await ArchivalMemory(session, embedder).search(agent_id, query, k=k, vector=embedding)
    messages = await RecallMemory(session, embedder).search(agent_id, query, k=k, below_seq=context_start_seq, vector=embedding)
    # (source, content, when, cosine to the query, lexical tokens) of every hit of either memory
    hits = [("archival", m.passage.content, m.passage.created_at, m.similarity, m.passage.search_text) for m in passages]
    hits += [("conversation", f"{m.role}: {m.recall_text()}", m.created_at, h.similarity, m.search_text) for m, h in messages]
    found: list[Recollection] = []
    for source, content, created_at, similarity, search_text in hits:
        cov = coverage(query_tokens, search_text)
        if relevant(similarity - base, cov):
            found.append(Recollection(source, content, created_at, similarity, similarity - base, cov))
    found.sort(key=lambda r: max(r.margin / MIN_MARGIN, r.coverage / MIN_COVERAGE), reverse=True)
    return found[:k]


def render(recollections: list[Recollection]) -> str | None:
    if not recollections:
        return None
    return "\n".join(f"- [{r.source}, {r.created_at:%Y-%m-%d}] {r.content[:RECOLLECTION_CHARS]}" for r in recollections)
