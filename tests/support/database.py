"""The test database as tests reach it directly: new databases, plain SQL, query plans, agents' own indexes."""

import asyncio
import json
import time
import uuid

from pgserver.postgres_server import PostgresServer
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from app import db
from app.memory.kinds import TABLES
from app.memory.search.agent_indexes import OwnIndexes, maintain_once


def create_database(server: PostgresServer, name: str) -> str:
    server.psql(f'CREATE DATABASE "{name}";')
    return db.asyncpg_url(server.get_uri(name))


def run_sql(database_url: str, sql: str, params: dict | None = None) -> list:
    """Run one statement in its own transaction and return its rows (none for a statement without a result)."""

    async def run() -> list:
        engine = create_async_engine(db.asyncpg_url(database_url))
        try:
            async with engine.begin() as conn:
                result = await conn.execute(text(sql), params or {})
                return [tuple(row) for row in result.all()] if result.returns_rows else []
        finally:
            await engine.dispose()

    return asyncio.run(run())


def plan_nodes(database_url: str, sql: str, params: dict) -> list[dict]:
    """Every node of the statement's plan, run once (EXPLAIN ANALYZE's JSON)."""
    [(plan,)] = run_sql(database_url, f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
    [explained] = json.loads(plan) if isinstance(plan, str) else plan
    return plan_subtree(explained["Plan"])


def plan_subtree(node: dict) -> list[dict]:
    """A plan node and every node below it."""
    return [node] + [below for child in node.get("Plans", []) for below in plan_subtree(child)]


def build_own_indexes(database_url: str, indexes: OwnIndexes) -> list[str]:
    """One round of the service's own-index upkeep (agent_indexes.maintain_once); the names built."""

    async def run() -> list[str]:
        engine = db.create_engine(database_url)
        try:
            return await maintain_once(engine, TABLES, indexes)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def analyze(database_url: str, table: str) -> None:
    """ANALYZE the table. Another test's app may be building an agent's own index on it (CREATE INDEX CONCURRENTLY,
    app/memory/search/agent_indexes.py), which waits for transactions older than itself while holding the lock
    ANALYZE needs: PostgreSQL resolves the wait as a deadlock, and ANALYZE, cancelled, is simply run again."""
    for attempt in range(5):
        try:
            run_sql(database_url, f"ANALYZE {table}")
            return
        except DBAPIError as exc:
            if "deadlock detected" not in str(exc) or attempt == 4:
                raise
            time.sleep(0.2)


def index_parts(database_url: str, index: str) -> set[str]:
    """The indexes a partitioned table's index has on its partitions (each partition's own part of it)."""
    rows = run_sql(
        database_url,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = CAST(:index AS regclass)",
        {"index": index},
    )
    return {name for (name,) in rows}


def agent_beside(database_url: str, agent_id: uuid.UUID, name: str) -> uuid.UUID:
    """A new agent whose rows share a partition with `agent_id`'s (the tables are hash-partitioned by agent)."""
    [(neighbour,)] = run_sql(
        database_url,
        """
        WITH parts AS (SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'archival_passages'::regclass),
        home AS (SELECT r FROM parts, generate_series(0, parts.n - 1) AS r
                 WHERE satisfies_hash_partition('archival_passages'::regclass, parts.n, r, CAST(:agent AS uuid)))
        SELECT u FROM parts, home, (SELECT gen_random_uuid() AS u FROM generate_series(1, 10000)) AS candidates
        WHERE satisfies_hash_partition('archival_passages'::regclass, parts.n, home.r, u) LIMIT 1""",
        {"agent": agent_id},
    )
    run_sql(
        database_url,
        "INSERT INTO agents (id, tenant_id, name, context_start_seq, created_at, updated_at) "
        "SELECT :id, tenant_id, :name, 0, now(), now() FROM agents WHERE id = :agent",
        {"id": neighbour, "name": name, "agent": agent_id},
    )
    return uuid.UUID(str(neighbour))
