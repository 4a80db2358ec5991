"""Hybrid retrieval in one SQL statement, shared by archival passages and recall messages.

Candidates: the top rows by cosine distance (HNSW index) and the top rows by BM25 over the lexical tokens (found
through the GIN index, scored exactly: term and document frequencies counted over the matching rows). Fusion: a
convex combination of the two scores, each min-max normalised over the candidates (cosine over [min, max],
BM25 over [0, max]), with equal weights.

Why not PostgreSQL's ts_rank: it has no inverse document frequency, so a common word weighs as much as a rare
name (LongMemEval_S, evidence-turn recall@5: ts_rank 0.48, BM25 over the same tokens 0.82). Why not reciprocal-rank
fusion: it keeps only ranks, so a clear lexical winner and a lexical tie fuse alike; on the same set RRF (k=60)
gives 0.39 recall@1 and 0.80 recall@5, the convex combination 0.51 and 0.82, and every weight from 0.3 to 0.7 gives
0.82-0.84 at @5 (not a tuned optimum; Bruch et al., "An Analysis of Fusion Functions for Hybrid Retrieval", 2023,
found the same ordering across BEIR). See bench/retrieval.py."""

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

CANDIDATES_PER_LIST = 100
BM25_K1 = 1.2
BM25_B = 0.75
# Rows scored by BM25 at most (those with the best ts_rank): bounds the work for a term that matches everything.
MAX_LEXICAL_MATCHES = 5000
# Weight of the normalised cosine similarity; the rest goes to normalised BM25.
VECTOR_WEIGHT = {"hybrid": 0.5, "vector": 1.0, "text": 0.0}

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
    alpha = VECTOR_WEIGHT[mode]
    return f"""
WITH vec AS (
    SELECT id FROM {table}
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
), bm25 AS (
    SELECT tf.id, sum(
        ln(1 + (corpus.n - df.df + 0.5) / (df.df + 0.5))
        * tf.tf * {BM25_K1 + 1} / (tf.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * m.token_count / corpus.avgdl))
    ) AS score
    FROM tf JOIN df USING (term) JOIN matches m ON m.id = tf.id CROSS JOIN corpus
    GROUP BY tf.id
), lex AS (
    SELECT id FROM bm25 ORDER BY score DESC, id LIMIT {lex_limit}
), pool AS (
    SELECT t.id, coalesce(1 - (t.embedding <=> CAST(:embedding AS vector)), 0) AS similarity, coalesce(b.score, 0) AS bm25
    FROM (SELECT id FROM vec UNION SELECT id FROM lex) p
    JOIN {table} t ON t.id = p.id LEFT JOIN bm25 b ON b.id = p.id
), bounds AS (
    SELECT min(similarity) AS smin, max(similarity) AS smax, max(bm25) AS bmax FROM pool
)
SELECT pool.id, pool.similarity,
       {alpha} * coalesce((pool.similarity - smin) / nullif(smax - smin, 0), 1)
       + {1 - alpha} * coalesce(pool.bm25 / nullif(bmax, 0), 0) AS score
FROM pool CROSS JOIN bounds
ORDER BY score DESC, similarity DESC, id
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
