"""Database engine, sessions, the embedded PostgreSQL, and schema migrations."""

import asyncio
import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.util import await_
from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import Conflict, DatabaseUnreachable, EngramError, Unprocessable

log = logging.getLogger("engram.db")

REPO_ROOT = Path(__file__).resolve().parent.parent
ALEMBIC_INI = REPO_ROOT / "alembic.ini"


def asyncpg_url(url: str) -> str:
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://", "postgresql+psycopg://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    raise ValueError(f"DATABASE_URL must be a PostgreSQL URL, got {url.split('://')[0]}://…")


@dataclass
class EmbeddedPostgres:
    url: str
    server: Any

    def stop(self) -> None:
        """Stops the server unless another live process still uses it (pgserver would do it at exit, but a SIGTERM
        ends the process without atexit hooks), and logs what really happened. A process killed beside this one
        (SIGKILL, the OOM killer) never took itself off pgserver's list of users: it is dropped first, or the server
        would outlive everyone."""
        from pgserver.postgres_server import PostgresServer

        with PostgresServer._lock:
            _forget_dead_users(Path(self.server.pgdata))
        self.server.cleanup()
        users = [pid for pid in self.server.global_process_id_list.get() if pid != os.getpid() and _alive(pid)]
        if users:
            log.warning("embedded PostgreSQL left running: still used by process(es) %s", users)
        else:
            log.info("embedded PostgreSQL stopped")


def start_embedded_postgres(data_dir: Path) -> EmbeddedPostgres:
    """Start (or reuse) a private PostgreSQL with pgvector under data_dir, recovering from an unclean exit."""
    from pgserver.postgres_server import PostgresServer, get_server
    from pgserver.utils import PostmasterInfo

    pgdata = (data_dir / "pgdata").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with PostgresServer._lock:  # pgserver's own inter-process lock over the handle list
        dead = _forget_dead_users(pgdata)
        postmaster = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "postmaster.pid").exists() else None
    if dead:
        log.warning(
            "embedded PostgreSQL: process(es) %s ended without stopping it (killed?); %s",
            dead,
            "reusing the server they left running" if postmaster and postmaster.is_running() else "starting it again",
        )
    elif postmaster is not None and not postmaster.is_running():
        log.warning("embedded PostgreSQL: the previous server died without a clean shutdown; it recovers from its WAL")
    server = get_server(pgdata, cleanup_mode="stop")
    log.info("embedded PostgreSQL running from %s", pgdata)
    return EmbeddedPostgres(asyncpg_url(server.get_uri()), server)


def _forget_dead_users(pgdata: Path) -> list[int]:
    """Drops from pgserver's list of processes using the server those that are gone: a process killed with SIGKILL
    (or by the OOM killer) never removes itself, and while it is listed no clean stop ever stops the server."""
    from pgserver.utils import DiskList

    users = DiskList(pgdata / ".handle_pids.json")
    listed = users.get()
    dead = [pid for pid in listed if pid != os.getpid() and not _alive(pid)]
    if dead:
        users.put([pid for pid in listed if pid not in dead])
    return dead


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# Set once per connection rather than per search. Without iterative scans, an HNSW scan filtered to one agent can
# return fewer rows than asked for.
# max_parallel_workers_per_gather 0: a search of a large agent was planned in parallel, and starting the workers
# cost more (~15 ms of Gather Merge) than they saved; a service answering many small requests at once has no idle
# cores to lend a single query anyway.
# plan_cache_mode force_custom_plan: each statement is planned for its values. A generic plan (asyncpg prepares every
# statement; PostgreSQL switches to one after five runs) cannot leave out the partitions of other agents (migration
# 0015), and locks all of them and their indexes at every run: a 5,000-passage agent's hybrid search took 21.8 against
# 17.2 ms planned each time.
SESSION_SETTINGS = {
    "hnsw.iterative_scan": "relaxed_order",
    "max_parallel_workers_per_gather": "0",
    "plan_cache_mode": "force_custom_plan",
}


def create_engine(url: str, pool_size: int = 20) -> AsyncEngine:
    # A short connect timeout: while the database is down, requests fail fast with 503 instead of hanging.
    engine = create_async_engine(
        asyncpg_url(url),
        pool_size=pool_size,
        max_overflow=30,
        # no pool_pre_ping: its ping on asyncpg is three round trips (`_ping` is one)
        # the most recently used connection first: at ordinary load a few backends serve every request, their caches
        # warm (round-robin over the 20 costs a hybrid search 7.3 against 4.7 ms)
        pool_use_lifo=True,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args={"timeout": 5, "server_settings": SESSION_SETTINGS},
    )
    event.listen(engine.sync_engine, "do_connect", _connect)
    event.listen(engine.sync_engine, "checkout", _ping)
    return engine


def _ping(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Checks a pooled connection as it is handed out: a backend that died (a database restart, an idle timeout, a
    terminated backend) costs the request nothing but a new connection. One round trip: `SELECT 1` in the simple
    query protocol (asyncpg fails on the empty response to `;`). SQLAlchemy's own pre-ping on asyncpg opens and rolls
    back a transaction around a prepared `;` (for pgbouncer's transaction mode, which has no trouble with a
    simple-protocol statement): three, ~7 % of a short search's time on the event loop. A failure invalidates every
    pooled connection, as the pre-ping does: after a restart they are all dead."""
    try:
        await_(dbapi_connection.driver_connection.execute("SELECT 1"))
    except Exception as error:
        raise exc.InvalidatePoolError(f"pooled connection failed its ping: {error!r}") from error


def _connect(dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> Any:
    """Opens a connection; a network failure on the way (refused, unreachable, DNS, connect timeout) is the
    database being unreachable — only here, so that an OSError elsewhere keeps its own meaning."""
    try:
        return dialect.connect(*cargs, **cparams)
    except OSError as exc:  # TimeoutError included
        raise DatabaseUnreachable("the database is unreachable; retry shortly") from exc


async def open_pool(engine: AsyncEngine, size: int) -> None:
    """Opens `size` connections now and returns them to the pool, which keeps them (a fixed-size pool: a connection
    opened at the first burst instead would stay open from then on, the count growing with each new peak)."""
    async with AsyncExitStack() as held:  # held at once: each checkout opens a new one
        for _ in range(size):
            await held.enter_async_context(engine.connect())


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


@asynccontextmanager
async def reading(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """Reads without a transaction: under READ COMMITTED each statement sees its own snapshot either way, and
    AUTOCOMMIT spares the BEGIN and COMMIT round trips (2 of a search's 7)."""
    async with sessions() as session:
        await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        yield session


@asynccontextmanager
async def transaction(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """One unit of work: committed when the block ends, rolled back on any error or cancellation."""
    async with sessions() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


def run_migrations(
    url: str, embedding_dim: int, revision: str = "head", *, partitions: int | None = None, downgrade: bool = False
) -> None:
    """alembic upgrade, or `downgrade` to `revision` (blocking; env.py runs its own event loop). `partitions`: of the
    tables partitioned by agent, when they are made (migration 0015; default ENGRAM_PARTITIONS, else 16)."""
    from alembic.config import Config

    from alembic import command

    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(REPO_ROOT / "alembic"))
    config.attributes["database_url"] = asyncpg_url(url)
    config.attributes["embedding_dim"] = embedding_dim
    config.attributes["partitions"] = partitions
    (command.downgrade if downgrade else command.upgrade)(config, revision)


async def migrate(url: str, embedding_dim: int, partitions: int | None = None) -> None:
    await asyncio.to_thread(functools.partial(run_migrations, url, embedding_dim, partitions=partitions))


# SQLSTATE class 08 (connection exception), and a server shutting down or starting up.
_UNAVAILABLE_STATES = ("08", "57P01", "57P02", "57P03")


def database_unreachable(exc: DBAPIError) -> bool:
    state = str(getattr(exc.orig, "sqlstate", "") or "")
    return (
        exc.connection_invalidated
        or isinstance(exc, (OperationalError, InterfaceError))
        or any(state.startswith(prefix) for prefix in _UNAVAILABLE_STATES)
    )


def rejected_as_data(exc: DBAPIError) -> bool:
    """SQLSTATE class 22 (data exception): text with NUL characters, out-of-range numbers… — bad input, not a fault."""
    return str(getattr(exc.orig, "sqlstate", "") or "").startswith("22")


def violates_foreign_key(exc: DBAPIError) -> bool:
    """SQLSTATE 23503: a row names a parent that is not there (an agent deleted meanwhile, say)."""
    return str(getattr(exc.orig, "sqlstate", "") or "") == "23503"


# What the database layer raises when a statement fails or no connection is free (the API maps each: failure_as_error).
DATABASE_FAILURES: tuple[type[Exception], ...] = (DBAPIError, exc.TimeoutError)


def failure_as_error(failure: Exception) -> EngramError | None:
    """A database failure as what it means to the caller: input it cannot store (422), a concurrent change of the
    same row (409), the database unreachable or no connection free in time (503); None: a fault of Engram's."""
    if isinstance(failure, exc.TimeoutError):
        return DatabaseUnreachable("the database is unreachable; retry shortly")
    if not isinstance(failure, DBAPIError):
        return None
    if rejected_as_data(failure):
        return Unprocessable(f"the input cannot be stored: {failure.orig}")
    if isinstance(failure, exc.IntegrityError):
        return Conflict("a concurrent request changed the same thing; retry")
    if database_unreachable(failure):
        return DatabaseUnreachable("the database is unreachable; retry shortly")
    return None
