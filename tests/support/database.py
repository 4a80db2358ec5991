"""The test database as tests reach it directly: new databases, plain SQL, query plans, agents' own indexes."""

import asyncio
import json
import time

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from app import db
from app.memory.search.agent_indexes import OwnIndexes, maintain_once


def create_database(server: object, name: str) -> str:
    server.psql(f'CREATE DATABASE "{name}";')  # type: ignore[attr-defined]
    return db.asyncpg_url(server.get_uri(name))  # type: ignore[attr-defined]


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
            return await maintain_once(engine, indexes)
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
