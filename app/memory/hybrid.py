"""Hybrid retrieval in one SQL statement, shared by archival passages and recall messages: the top candidates by
cosine distance (HNSW index) and by BM25 over the lexical tokens (candidates found through the GIN index, scored
exactly: term and document frequencies counted over the matching rows), fused with reciprocal-rank fusion.

PostgreSQL's own ts_rank has no inverse document frequency, so a common word weighs as much as a rare name: on
LongMemEval_S it finds 0.48 of evidence turns in the top 5 where BM25 over the same tokens finds 0.83."""

import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from sqlalchemy import select, text
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from app.memory import lexical
from app.metrics import SEARCH_SECONDS

RRF_K = 60
CANDIDATES_PER_LIST = 100
BM25_K1 = 1.2
BM25_B = 0.75
# Rows scored by BM25 at most (those with the best ts_rank): bounds the work for a term that matches everything.
MAX_LEXICAL_MATCHES = 5000
# Scales the fused score to 0..1: 1 is first in both lists.
_RRF_MAX = 2.0 / (RRF_K + 1)

Mode = Literal["hybrid", "vector", "text"]
Row = TypeVar("Row", bound=SQLModel)


@dataclass
class Hit:
    id: uuid.UUID
    score: float
    similarity: float


def _sql(table: str, where: str, mode: Mode) -> str:
    vec_limit = CANDIDATES_PER_LIST if mode != "text" else 0
    lex_limit = CANDIDATES_PER_LIST if mode != "vector" else 0
    return f"""
WITH vec AS (
    SELECT id, row_number() OVER (ORDER BY embedding <=> CAST(:embedding AS vector)) AS rank
    FROM {table}
    WHERE {where} AND embedding IS NOT NULL
    ORDER BY embedding <=> CAST(:embedding AS vector)
    LIMIT {vec_limit}
), matches AS (
    SELECT id, search_text, token_count
    FROM {table}, to_tsquery('simple', :tsquery) AS q
    WHERE {where} AND :tsquery <> '' AND tsv @@ q
    ORDER BY ts_rank(tsv, q) DESC
    LIMIT {MAX_LEXICAL_MATCHES if lex_limit else 0}
), tf AS (
    SELECT m.id, w.term, count(*) AS tf
    FROM matches m CROSS JOIN LATERAL unnest(string_to_array(m.search_text, ' ')) AS w(term)
    WHERE w.term = ANY(CAST(:terms AS text[]))
    GROUP BY m.id, w.term
), df AS (
    SELECT term, count(*) AS df FROM tf GROUP BY term
), corpus AS (
    SELECT count(*) AS n, greatest(avg(token_count), 1) AS avgdl FROM {table} WHERE {where}
), lex AS (
    SELECT tf.id, row_number() OVER (ORDER BY sum(
        ln(1 + (corpus.n - df.df + 0.5) / (df.df + 0.5))
        * tf.tf * {BM25_K1 + 1} / (tf.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * m.token_count / corpus.avgdl))
    ) DESC, tf.id) AS rank
    FROM tf JOIN df USING (term) JOIN matches m ON m.id = tf.id CROSS JOIN corpus
    GROUP BY tf.id
    ORDER BY rank
    LIMIT {lex_limit}
), fused AS (
    SELECT id, coalesce(1.0 / ({RRF_K} + vec.rank), 0) + coalesce(1.0 / ({RRF_K} + lex.rank), 0) AS rrf
    FROM vec FULL OUTER JOIN lex USING (id)
)
SELECT fused.id, fused.rrf / {_RRF_MAX} AS score,
       coalesce(1 - (t.embedding <=> CAST(:embedding AS vector)), 0) AS similarity
FROM fused JOIN {table} t ON t.id = fused.id
ORDER BY score DESC, similarity DESC
LIMIT :k
"""


async def hybrid_search(
    session: AsyncSession,
    model: type[Row],
    agent_id: uuid.UUID,
    *,
    embedding: list[float],
    terms: list[str],
    k: int,
    where: list[str] | None = None,
    params: dict[str, Any] | None = None,
    after: datetime | None = None,
    before: datetime | None = None,
    mode: Mode = "hybrid",
) -> list[tuple[Row, Hit]]:
    """`where`: extra trusted SQL conditions over the table, their values bound through `params`."""
    where = ["agent_id = :agent_id", *(where or [])]
    params = {
        **(params or {}), "agent_id": agent_id, "embedding": str(embedding), "k": k,
        "tsquery": lexical.tsquery_of(terms), "terms": terms,
    }
    if after:
        where.append("created_at > :after")
        params["after"] = after
    if before:
        where.append("created_at < :before")
        params["before"] = before
    # Without iterative scans, an HNSW scan filtered to one agent can return fewer rows than asked for.
    await session.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"))
    table = model.__tablename__  # type: ignore[attr-defined]
    started = time.perf_counter()
    hits = [Hit(r.id, float(r.score), float(r.similarity)) for r in (await session.execute(text(_sql(table, " AND ".join(where), mode)), params)).all()]
    if not hits:
        SEARCH_SECONDS.labels(table).observe(time.perf_counter() - started)
        return []
    rows = (await session.scalars(select(model).where(model.id.in_([h.id for h in hits])))).all()  # type: ignore[attr-defined]
    SEARCH_SECONDS.labels(table).observe(time.perf_counter() - started)
    by_id = {row.id: row for row in rows}  # type: ignore[attr-defined]
    return [(by_id[h.id], h) for h in hits if h.id in by_id]
