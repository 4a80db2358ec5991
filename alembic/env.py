"""Alembic environment: async engine; one transaction under an advisory lock so replicas never migrate at once."""

import asyncio
import os

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from alembic import context

MIGRATION_LOCK_KEY = 0x656E6772  # "engr"


def _database_url() -> str:
    """Given by `engram migrate` and the service; for a bare `alembic upgrade`, DATABASE_URL (migrations never
    import the application)."""
    url = context.config.attributes.get("database_url") or os.environ.get("DATABASE_URL")
    if not url:
        raise RuntimeError("DATABASE_URL is not set; use `engram migrate`, which also handles the embedded database")
    scheme, rest = url.split("://", 1)
    return f"postgresql+asyncpg://{rest}" if scheme.startswith("postgres") else url


def _migrate(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, compare_type=False)
    with context.begin_transaction():
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


async def _run() -> None:
    engine = create_async_engine(_database_url(), poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_migrate)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
asyncio.run(_run())
