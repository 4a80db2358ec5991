"""Database engine, sessions, the embedded PostgreSQL, and schema migrations."""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import DatabaseUnreachable

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
        """Stops the server (pgserver would do it at exit, but a SIGTERM ends the process without atexit hooks)."""
        self.server.cleanup()
        log.info("embedded PostgreSQL stopped")


def start_embedded_postgres(data_dir: Path) -> EmbeddedPostgres:
    """Start (or reuse) a private PostgreSQL with pgvector under data_dir."""
    import pgserver

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir / "pgdata", cleanup_mode="stop")
    log.info("embedded PostgreSQL running from %s", data_dir / "pgdata")
    return EmbeddedPostgres(asyncpg_url(server.get_uri()), server)


# Set once per connection rather than per search. Without iterative scans, an HNSW scan filtered to one agent can
# return fewer rows than asked for.
# max_parallel_workers_per_gather 0: a search of a large agent was planned in parallel, and starting the workers
# cost more (~15 ms of Gather Merge, EXPLAIN ANALYZE in bench/search_scale.py) than they saved; a service answering
# many small requests at once has no idle cores to lend a single query anyway.
SESSION_SETTINGS = {"hnsw.iterative_scan": "relaxed_order", "max_parallel_workers_per_gather": "0"}


def create_engine(url: str) -> AsyncEngine:
    # A short connect timeout: while the database is down, requests fail fast with 503 instead of hanging.
    engine = create_async_engine(
        asyncpg_url(url),
        pool_size=20,
        max_overflow=30,
        pool_pre_ping=True,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args={"timeout": 5, "server_settings": SESSION_SETTINGS},
    )
    event.listen(engine.sync_engine, "do_connect", _connect)
    return engine


def _connect(dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> Any:
    """Opens a connection; a network failure on the way (refused, unreachable, DNS, connect timeout) is the
    database being unreachable — only here, so that an OSError elsewhere keeps its own meaning."""
    try:
        return dialect.connect(*cargs, **cparams)
    except OSError as exc:  # TimeoutError included
        raise DatabaseUnreachable("the database is unreachable; retry shortly") from exc


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


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


def run_migrations(url: str, embedding_dim: int, revision: str = "head") -> None:
    """alembic upgrade (blocking; env.py runs its own event loop)."""
    from alembic.config import Config

    from alembic import command

    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(REPO_ROOT / "alembic"))
    config.attributes["database_url"] = asyncpg_url(url)
    config.attributes["embedding_dim"] = embedding_dim
    command.upgrade(config, revision)


async def migrate(url: str, embedding_dim: int) -> None:
    await asyncio.to_thread(run_migrations, url, embedding_dim)
