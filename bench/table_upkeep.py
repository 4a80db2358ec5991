"""What a large archival table costs to keep besides searching it: inserts, VACUUM, its size on disk. Measured the
same way on one table (migration 0014) and on tables partitioned by agent (0015) by bench/search_scale.py
--before-after, the partition tree read from the catalog (a plain table is its own only leaf).
"""

import time
import uuid

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app import db

TABLE = "archival_passages"
INSERT_SQL = (
    f"INSERT INTO {TABLE} (id, agent_id, content, search_text, embedding, embedding_model, tags, created_at) "
    "VALUES (:id, :agent, :text, :text, CAST(:vector AS vector), 'synthetic', '{}', now())"
)


def rows(agent_id: uuid.UUID, texts: list[str], vectors: np.ndarray) -> list[dict[str, object]]:
    return [
        {"id": uuid.uuid4(), "agent": agent_id, "text": t, "vector": str(v.tolist())} for t, v in zip(texts, vectors, strict=True)
    ]


async def insert(sessions: async_sessionmaker[AsyncSession], batch: list[dict[str, object]]) -> None:
    """One transaction, one multi-row INSERT (what ArchivalMemory.add sends for a batch of passages)."""
    async with db.transaction(sessions) as session:
        await (await session.connection()).execute(text(INSERT_SQL), batch)


async def leaves(conn: AsyncConnection) -> list[str]:
    query = text(f"SELECT relid::regclass::text FROM pg_partition_tree('{TABLE}') WHERE isleaf")
    return list((await conn.execute(query)).scalars().all()) or [TABLE]


async def size_on_disk(engine: AsyncEngine) -> str:
    """Heap (with TOAST), indexes and the total, summed over the partitions."""
    async with engine.connect() as conn:
        heap, indexes = (
            await conn.execute(
                text("SELECT sum(pg_table_size(r)), sum(pg_indexes_size(r)) FROM unnest(CAST(:r AS regclass[])) AS r"),
                {"r": await leaves(conn)},
            )
        ).one()
    mib = 2**20
    return f"size on disk: heap {heap / mib:,.0f} MiB, indexes {indexes / mib:,.0f} MiB, total {(heap + indexes) / mib:,.0f} MiB"


async def vacuum(engine: AsyncEngine, target: str, options: str = "") -> float:
    """Seconds a VACUUM of `target` (a table, a partitioned table: each partition in turn) takes."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        started = time.perf_counter()
        await conn.execute(text(f"VACUUM {options} {target}"))
        return time.perf_counter() - started


async def home_of(engine: AsyncEngine, agent_id: uuid.UUID) -> str:
    """The table holding an agent's rows: what autovacuum visits after they change."""
    async with engine.connect() as conn:
        home: str = (
            await conn.execute(text(f"SELECT tableoid::regclass::text FROM {TABLE} WHERE agent_id = :a LIMIT 1"), {"a": agent_id})
        ).scalar_one()
    return home


async def delete_agents(sessions: async_sessionmaker[AsyncSession], agents: list[uuid.UUID]) -> float:
    """Seconds deleting the agents takes, one per transaction as the API deletes one (their rows go by cascade)."""
    started = time.perf_counter()
    for agent_id in agents:
        async with db.transaction(sessions) as session:
            await (await session.connection()).execute(text("DELETE FROM agents WHERE id = :a"), {"a": agent_id})
    return time.perf_counter() - started
