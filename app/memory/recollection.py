"""Retrieval that does not wait for the model to remember to search: at the start of a turn the user's message is
searched in archival and recall memory, and the hits that pass a relevance gate go into the prompt.

The gate first asks whether memory holds anything about the message at all: some hit must be close in meaning or
share enough of the query's words. Close: its cosine similarity stands out from the query's baseline (the margin
over the query's similarity to generic text, see app/memory/cohort_baseline.py; a raw cosine cannot tell, since
multilingual-e5 scores unrelated texts 0.75-0.85). Words: lexical coverage, the share of the query's distinct
tokens found in the hit (bigrams for Japanese). When one does, how many go in is set by how the fused scores fall
away from the best: evident hits within EVIDENT_RATIO of the best evident one, the others within COMPANY_RATIO of
the best (in a conversation the answer is often a short turn that shares neither words nor much meaning with the
question, and the fused ranking, not the gate, is what finds it). A question with one clear answer gets a few
lines; one whose answer is spread over many similar turns gets more, up to K and a budget of characters (one too
long for what is left gives way to shorter ones after it). They go in best first, under a heading per day (and
memory, for earlier messages). Thresholds, K and the budget come from bench/recollection.py, chosen on LoCoMo,
LongMemEval and the Japanese set together (bench/README.md)."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from app.llm.embeddings import Embedder
from app.memory import lexical
from app.memory.cohort_baseline import baseline, centroid
from app.memory.service import ArchivalMemory, RecallMemory

MIN_MARGIN = 0.08
MIN_COVERAGE = 0.7
MIN_QUERY_TOKENS_FOR_COVERAGE = 2
EVIDENT_RATIO = 0.665  # of the fused score of the best evident hit of the same memory
COMPANY_RATIO = 0.8
RECOLLECTION_CHARS = 600  # of one memory
BUDGET_CHARS = 2500  # of all of them
SEARCHED_PER_K = 2  # hits searched per memory for each one K lets in: `select` may pass over a long one


@dataclass
class Recollection:
    source: str  # "archival" | "conversation"
    content: str
    occurred_at: datetime
    similarity: float
    margin: float
    coverage: float
    score: float

    @property
    def evident(self) -> bool:
        """Relevant on its own: close in meaning or sharing enough of the query's words."""
        return self.margin >= MIN_MARGIN or self.coverage >= MIN_COVERAGE

    @property
    def heading(self) -> str:
        """The day, and for an earlier message its memory: archival memory is most of what is recollected, and
        its name on every day's heading cost a LoCoMo prompt ~60 characters, a budget of 1,500 then (render)."""
        day = f"{self.occurred_at:%Y-%m-%d}"
        return f"[{day}]" if self.source == "archival" else f"[{self.source}, {day}]"

    @property
    def item(self) -> str:
        return f"- {self.content[:RECOLLECTION_CHARS]}"


async def ready(embedder: Embedder) -> None:
    """What recollection asks of the embedder besides the query's vector: the baseline's generic passages, embedded
    once per process. A turn asks for it with the query, before it reads its context: an embedder failing there
    costs the turn its recollections, not the turn, and no transaction waits on the embedder."""
    await centroid(embedder)


def coverage(query_tokens: set[str], search_text: str) -> float:
    if len(query_tokens) < MIN_QUERY_TOKENS_FOR_COVERAGE:
        return 0.0
    return len(query_tokens & set(search_text.split())) / len(query_tokens)


def select(
    hits: list[Recollection],
    *,
    k: int,
    budget: int = BUDGET_CHARS,
    company: float = COMPANY_RATIO,
    evident_ratio: float = EVIDENT_RATIO,
) -> list[Recollection]:
    """The hits that go into the prompt, best first: none unless one is evident; then the evident ones within
    `evident_ratio` of the best evident score of their memory and the others within `company` of its best score, at
    most `k` and `budget` characters as `render` writes them (the first always fits). A hit too long for what is
    left of the budget leaves its place to the next that fits."""
    if not any(h.evident for h in hits):
        return []
    best = _best_scores(hits)
    # Evident hits are measured against the best evident one: a hit that outscores it without being evident (a
    # date or speaker bonus, a strong BM25 share) must not push out what opened the gate.
    best_evident = _best_scores([h for h in hits if h.evident])

    def comes_along(h: Recollection) -> bool:
        if h.evident:
            return h.score >= evident_ratio * best_evident[h.source]
        return h.score >= company * best[h.source]

    kept = sorted(filter(comes_along, hits), key=lambda h: -h.score)
    chosen: list[Recollection] = []
    headings: set[str] = set()
    used = 0
    for hit in kept:
        size = len(hit.item) + 1 + (0 if hit.heading in headings else len(hit.heading) + 1)
        if chosen and used + size > budget:
            continue
        chosen.append(hit)
        headings.add(hit.heading)
        used += size
        if len(chosen) == k:
            break
    return chosen


def _best_scores(hits: list[Recollection]) -> dict[str, float]:
    """The best score of each memory (source) among `hits`."""
    best: dict[str, float] = {}
    for h in hits:
        best[h.source] = max(h.score, best.get(h.source, h.score))
    return best


async def hits(
    session: AsyncSession,
    agent_id: uuid.UUID,
    query: str,
    embedding: list[float],
    *,
    embedder: Embedder,
    k: int,
    context_start_seq: int,
) -> list[Recollection]:
    """The top `k` current archival passages (never a superseded one) and earlier messages (those no longer in the
    context), with what the gate judges them on, before it does."""
    query_tokens = set(lexical.query_terms(query))
    base = await baseline(embedder, embedding)
    passages = await ArchivalMemory(session, embedder).search(agent_id, query, k=k, vector=embedding)
    messages = await RecallMemory(session, embedder).search(agent_id, query, k=k, below_seq=context_start_seq, vector=embedding)
    found = [
        ("archival", m.passage.content, m.passage.occurred_at, m.similarity, m.score, m.passage.search_text) for m in passages
    ]
    found += [
        ("conversation", f"{m.role}: {m.recall_text()}", m.occurred_at, h.similarity, h.score, m.search_text) for m, h in messages
    ]
    return [
        Recollection(source, content, when, similarity, similarity - base, coverage(query_tokens, tokens), score)
        for source, content, when, similarity, score, tokens in found
    ]


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
    """Relevant archival passages and earlier messages, best first: `hits` through the gate (`select`), which may
    pass over a long hit for shorter ones after it (hence SEARCHED_PER_K x `k` searched)."""
    found = await hits(
        session, agent_id, query, embedding, embedder=embedder, k=SEARCHED_PER_K * k, context_start_seq=context_start_seq
    )
    return select(found, k=k)


def render(recollections: list[Recollection]) -> str | None:
    """Best first, under a heading of their day written once for the hits they share ("[2023-05-08]" for archival
    memory, "[conversation, 2023-05-08]" for earlier messages; the day of its best hit places a heading): a
    conversation's hits often come from a few sessions, and a heading per line cost them 25 characters each
    (bench/README.md, "Memory in the prompt")."""
    if not recollections:
        return None
    days: dict[str, list[str]] = {}
    for r in recollections:
        days.setdefault(r.heading, []).append(r.item)
    return "\n".join(line for heading, items in days.items() for line in (heading, *items))
