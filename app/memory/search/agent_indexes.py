"""Own vector indexes for the largest agents: a partial HNSW index over one agent's rows (`WHERE agent_id = …`).

An agent without one is searched by an exact scan of its rows (one distance per row: linear in its history, ~1.5 ms
per 1,000 rows). An index shared by every agent (dropped in migration 0012) walked mostly other agents' nodes when the
agent was a small share of the table; an agent's own index holds only its rows: its search costs what a table of that
one agent would, among any number of rows.

Built in the background (`maintain`, every replica; one build at a time across replicas by an advisory lock) with
CREATE INDEX CONCURRENTLY, which never blocks writes; a build cut short (a stop, a crash) leaves an invalid index,
dropped and built again on the next round. Searches ask for the index through its predicate, written out in the
statement (hybrid._nearest), only for agents this process has seen an index of (`OWN_INDEXES`, read from the
catalog each round): an agent whose index is not there yet, or no longer, gets an exact scan — the same rows.

The tables are partitioned by agent (migration 0015): an own index is built on the agent's partition, where a
statement naming the agent (its predicate is written out) is planned alone. Every index of a partition is opened by
each statement planned on it and checked on each insert there, so their number is capped per partition
(MAX_PER_PARTITION, the largest agents first): 64 times ENGRAM_PARTITIONS in all.
"""

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.llm.embeddings.space import stored_space

log = logging.getLogger(__name__)

# An agent gets its own index from this many rows (its exact scan then costs more than an index walk)...
INDEX_FROM = 2_000
# ...while its partition has fewer than this many own indexes.
MAX_PER_PARTITION = 64
ROUND_SECONDS = 30.0
# Memory for one build (the session's own: one build runs at a time); HNSW builds that spill take several times longer.
BUILD_MEMORY = "256MB"
# pg_try_advisory_lock(int4, int4): a key space apart from the single-bigint keys of turns and re-embedding.
BUILD_LOCK = {"space": 0x656E, "key": 1}


def index_name(table: str, agent_id: uuid.UUID) -> str:
    return f"ix_{table}_agent_{agent_id.hex}"


NAME = re.compile(r"^ix_(\w+)_agent_([0-9a-f]{32})$")


class OwnIndexes:
    """The (table, agent) pairs with a valid own index, as this process last read them from the catalog."""

    def __init__(self) -> None:
        self._valid: frozenset[tuple[str, uuid.UUID]] = frozenset()

    def has(self, table: str, agent_id: uuid.UUID) -> bool:
        return (table, agent_id) in self._valid

    async def refresh(self, conn: AsyncConnection, tables: Sequence[str]) -> dict[str, tuple[bool, str]]:
        """Reads the own indexes of `tables` from the catalog; returns each one's name -> (whether it is valid, its
        partition)."""
        found = await _own_indexes(conn, tables)
        self._valid = frozenset(_parse(name) for name, (valid, _) in found.items() if valid)
        return found


OWN_INDEXES = OwnIndexes()


def _parse(name: str) -> tuple[str, uuid.UUID]:
    match = NAME.match(name)
    assert match, name
    return match[1], uuid.UUID(hex=match[2])


async def _own_indexes(conn: AsyncConnection, tables: Sequence[str]) -> dict[str, tuple[bool, str]]:
    """Each own index's name -> (whether it is valid, the partition it is on)."""
    rows = await conn.execute(
        text(
            "SELECT c.relname, i.indisvalid AND i.indisready, i.indrelid::regclass::text "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = ANY(CAST(:tables AS regclass[]))) "
            "AND c.relname ~ :name"
        ),
        {"tables": list(tables), "name": NAME.pattern},  # the pattern reads the same in Python and PostgreSQL
    )
    return {name: (bool(valid), partition) for name, valid, partition in rows.all()}


async def _partitions_of(conn: AsyncConnection, table: str, agents: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The partition each agent's rows are in."""
    rows = await conn.execute(
        text(
            f"SELECT a, (SELECT tableoid::regclass::text FROM {table} WHERE agent_id = a LIMIT 1) FROM unnest(CAST(:ids AS uuid[])) AS a"
        ),
        {"ids": agents},
    )
    return {agent_id: partition for agent_id, partition in rows.all() if partition is not None}


async def drop_own_indexes(conn: AsyncConnection, tables: Sequence[str]) -> None:
    """Every own index (before re-embedding every row: building them again afterwards costs less), in `conn`'s
    transaction, which waits for a build in progress and keeps new ones from starting until it ends."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(:space, :key)"), BUILD_LOCK)
    for name in await _own_indexes(conn, tables):
        await conn.execute(text(f"DROP INDEX IF EXISTS {name}"))


async def maintain(engine: AsyncEngine, tables: Sequence[str], indexes: OwnIndexes = OWN_INDEXES) -> None:
    """Runs for the life of the process, over `tables` (the searchable kinds', app/memory/kinds.py)."""
    while True:
        try:
            await maintain_once(engine, tables, indexes)
        except Exception:  # the database may be down; the next round tries again
            log.warning("own vector index maintenance failed", exc_info=True)
        await asyncio.sleep(ROUND_SECONDS)


async def maintain_once(engine: AsyncEngine, tables: Sequence[str], indexes: OwnIndexes = OWN_INDEXES) -> list[str]:
    """One round: drops the indexes left invalid, those of deleted agents and those of agents no longer among the
    largest when a larger one needs the room; builds the missing ones (largest first) and refreshes `indexes`.
    Returns the names built. Nothing is built while another replica holds the lock, or while `engram reembed` runs."""
    # AUTOCOMMIT: CREATE / DROP INDEX CONCURRENTLY cannot run inside a transaction
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            if not (await conn.execute(text("SELECT pg_try_advisory_lock(:space, :key)"), BUILD_LOCK)).scalar():
                await indexes.refresh(conn, tables)
                return []
            space = await stored_space(conn)
            built = await _round(conn, tables, indexes) if space is None or space[1] else []
            await conn.execute(text("RESET maintenance_work_mem"))  # the connection goes back to the pool
            await conn.execute(text("SELECT pg_advisory_unlock(:space, :key)"), BUILD_LOCK)
        except BaseException:
            # cut short (a stop cancels the task mid-build, an error): the session ends, and its lock and settings
            # with it; nothing more may run on it, and the first error is the one raised
            with contextlib.suppress(Exception):
                await conn.invalidate()
            raise
    return built


async def _round(conn: AsyncConnection, tables: Sequence[str], indexes: OwnIndexes) -> list[str]:
    drop, build = await _plan(conn, tables, await indexes.refresh(conn, tables))
    for name in drop:
        await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
        log.info("dropped own vector index %s", name)
    await conn.execute(text(f"SET maintenance_work_mem = '{BUILD_MEMORY}'"))
    for table, agent_id, partition in build:
        name = index_name(table, agent_id)
        started = time.perf_counter()
        await conn.execute(
            text(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {partition} "
                f"USING hnsw (embedding vector_cosine_ops) WHERE agent_id = '{agent_id}'::uuid"
            )
        )
        log.info("built own vector index %s on %s in %.1f s", name, partition, time.perf_counter() - started)
    for partition in sorted({partition for _, _, partition in build}):
        # the planner takes an own index only with statistics that know the agent's rows (a partition not analysed
        # since it grew plans an exact scan); autovacuum would get there, later
        await conn.execute(text(f"ANALYZE {partition}"))
    if drop or build:
        await indexes.refresh(conn, tables)
    return [index_name(table, agent_id) for table, agent_id, _ in build]


async def _plan(
    conn: AsyncConnection, tables: Sequence[str], existing: dict[str, tuple[bool, str]]
) -> tuple[list[str], list[tuple[str, uuid.UUID, str]]]:
    """(indexes to drop, (table, agent, partition) to build). Dropped: invalid ones (a build cut short), those of
    deleted agents, and — only to make room for a larger agent — the smallest of a partition's no longer among its
    MAX_PER_PARTITION largest. Built: each partition's largest agents of at least INDEX_FROM rows without one."""
    agents = [_parse(name)[1] for name in existing]
    alive = set((await conn.execute(text("SELECT id FROM agents WHERE id = ANY(:ids)"), {"ids": agents})).scalars())
    drop = [name for name, (valid, _) in existing.items() if not valid or _parse(name)[1] not in alive]
    build: list[tuple[str, uuid.UUID, str]] = []
    for table in tables:
        rows = await conn.execute(
            text("SELECT agent_id, docs FROM lexical_corpus WHERE source = :table AND docs >= :least"),
            {"table": table, "least": INDEX_FROM},
        )
        sizes: dict[uuid.UUID, int] = {agent_id: docs for agent_id, docs in rows.all()}
        homes = await _partitions_of(conn, table, list(sizes))
        kept = {
            _parse(name)[1]: partition
            for name, (_, partition) in existing.items()
            if _parse(name)[0] == table and name not in drop
        }
        for partition in sorted(set(homes.values()) | set(kept.values())):
            here = [a for a, home in homes.items() if home == partition]
            wanted = sorted(here, key=lambda a: (-sizes[a], a))[:MAX_PER_PARTITION]
            indexed = [a for a, home in kept.items() if home == partition]
            missing = [a for a in wanted if a not in indexed]
            surplus = sorted((a for a in indexed if a not in wanted), key=lambda a: sizes.get(a, 0))
            drop += [index_name(table, a) for a in surplus[: max(len(indexed) + len(missing) - MAX_PER_PARTITION, 0)]]
            build += [(table, a, partition) for a in missing]
    return drop, build
