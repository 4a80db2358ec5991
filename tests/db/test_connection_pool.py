"""The service's pool to PostgreSQL has a fixed size: opened whole at start-up, the same after a burst (the
connections of a peak beyond it are closed when returned), so the server's connection count stays flat. The event
relay's LISTEN connection is its own, outside the pool: every pooled connection is there for requests."""

import asyncio
import time
import uuid
from contextlib import AsyncExitStack

from pgserver.postgres_server import PostgresServer
from sqlalchemy.pool import QueuePool

from app import db
from app.llm.embeddings import Embedder
from app.main import create_app
from app.runtime import runtime
from app.settings import E5_DIM
from testkit.scripted_llm import ScriptedLLM
from tests.support.database import create_database, run_sql
from tests.support.service import app_of, checked_client, run_in_app, scripted_settings

POOL = 6


def backends(url: str, database: str) -> int:
    [(count,)] = run_sql(
        url, "SELECT count(*) FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid()", {"d": database}
    )
    return count


def settled_backends(url: str, database: str, expected: int, seconds: float = 10) -> int:
    """The server's count once it reaches `expected` or the time is up: a backend leaves pg_stat_activity a moment
    after its client closed the connection, and the relay's LISTEN connection opens a moment after start-up."""
    deadline = time.monotonic() + seconds
    while (count := backends(url, database)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def test_the_pool_is_opened_whole_at_start_and_a_burst_leaves_no_more_connections(
    postgres_server: PostgresServer, llm: ScriptedLLM, embedder: Embedder
) -> None:
    database = f"engram_pool_{uuid.uuid4().hex[:8]}"
    url = create_database(postgres_server, database)
    db.run_migrations(url, E5_DIM)
    with checked_client(create_app(scripted_settings(url, llm, db_pool_size=POOL), embedder=embedder)) as client:
        expected = POOL + 1  # and the event relay's own LISTEN connection, which it opens once started
        assert settled_backends(url, database, expected) == expected
        pool = runtime(app_of(client)).engine.pool
        assert isinstance(pool, QueuePool)  # app/db.py's engine: a queue of connections
        # the relay holds none of them (a background task may hold one at this moment; the count is the pool's)
        assert pool.checkedin() + pool.checkedout() == POOL

        async def burst() -> None:  # twice the pool in use at once: overflow connections are opened
            async with AsyncExitStack() as held:
                for _ in range(2 * POOL):
                    conn = await held.enter_async_context(runtime(app_of(client)).engine.connect())
                    await conn.exec_driver_sql("SELECT 1")

        run_in_app(client, burst)
        assert settled_backends(url, database, expected) == expected
        assert client.get("/readyz").status_code == 200


def test_a_pooled_connection_is_pinged_in_one_round_trip_and_replaced_when_its_backend_died(database_url: str) -> None:
    async def run() -> None:
        engine, admin = db.create_engine(database_url, pool_size=1), db.create_engine(database_url, pool_size=1)
        try:
            async with engine.connect() as conn:
                pid = (await conn.exec_driver_sql("SELECT pg_backend_pid()")).scalar()
                driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None  # asyncpg's connection
            sent: list[str] = []
            driver.add_query_logger(lambda logged: sent.append(logged.query))
            async with engine.connect() as conn:  # the same pooled connection (one in the pool)
                assert (await conn.exec_driver_sql("SELECT pg_backend_pid()")).scalar() == pid
            # the ping: one statement, then the connection's own transaction. SQLAlchemy's pre-ping was three: BEGIN,
            # a prepared `;` and ROLLBACK
            assert sent[:2] == ["SELECT 1", "BEGIN;"]

            async with admin.connect() as other:  # the pooled connection's backend ends while it waits in the pool
                await other.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")
            async with engine.connect() as conn:
                assert (await conn.exec_driver_sql("SELECT pg_backend_pid()")).scalar() != pid
        finally:
            await engine.dispose()
            await admin.dispose()

    asyncio.run(run())
