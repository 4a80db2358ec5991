"""Hybrid retrieval in one SQL statement: top candidates by cosine distance (HNSW) and by full-text rank (GIN),
fused with reciprocal-rank fusion. Shared by archival passages and recall messages."""

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

RRF_K = 60
CANDIDATES_PER_LIST = 100
# Scales the fused score to 0..1: 1 is first in both lists.
_RRF_MAX = 2.0 / (RRF_K + 1)


@dataclass
class Hit:
    id: uuid.UUID
    score: float
    similarity: float


def _sql(table: str, where: str) -> str:
    return f"""
WITH vec AS (
    SELECT id, row_number() OVER (ORDER BY embedding <=> CAST(:embedding AS vector)) AS rank
    FROM {table}
    WHERE {where} AND embedding IS NOT NULL
    ORDER BY embedding <=> CAST(:embedding AS vector)
    LIMIT {CANDIDATES_PER_LIST}
), lex AS (
    SELECT id, row_number() OVER (ORDER BY ts_rank_cd(tsv, q, 1) DESC, created_at DESC) AS rank
    FROM {table}, to_tsquery('simple', :tsquery) AS q
    WHERE {where} AND :tsquery <> '' AND tsv @@ q
    ORDER BY ts_rank_cd(tsv, q, 1) DESC, created_at DESC
    LIMIT {CANDIDATES_PER_LIST}
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
    table: str,
    *,
    where: list[str],
    params: dict[str, Any],
    embedding: list[float],
    tsquery: str | None,
    k: int,
) -> list[Hit]:
    """`where` holds trusted SQL conditions over `table` whose values are bound through `params`."""
    # Without iterative scans, an HNSW scan filtered to one agent can return fewer rows than asked for.
    await session.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"))
    bound = {**params, "embedding": str(embedding), "tsquery": tsquery or "", "k": k}
    rows = (await session.execute(text(_sql(table, " AND ".join(where) or "true")), bound)).all()
    return [Hit(row.id, float(row.score), float(row.similarity)) for row in rows]
