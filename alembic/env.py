"""Alembic environment: async engine; one transaction under an advisory lock so replicas never migrate at once."""

import asyncio

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from alembic import context

MIGRATION_LOCK_KEY = 0x656E6772  # "engr"


def _database_url() -> str:
    url = context.config.attributes.get("database_url")
    if url:
        return url
    from app.db import asyncpg_url
    from app.settings import get_settings

    configured = get_settings().database_url
    if not configured:
        raise RuntimeError("DATABASE_URL is not set; use `engram migrate`, which also handles the embedded database")
    return asyncpg_url(configured)


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
