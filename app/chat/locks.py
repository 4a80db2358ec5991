"""One turn at a time per agent, across every process on the database: a session-level advisory lock."""

import math
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.errors import Conflict
from app.metrics import LOCK_WAIT_SECONDS

LOCK_NOT_AVAILABLE = "55P03"


def lock_key(agent_id: uuid.UUID) -> int:
    return int.from_bytes(agent_id.bytes[:8], "big", signed=True)


class AgentBusy(Conflict):
    code = "agent_busy"


@asynccontextmanager
async def agent_turn_lock(engine: AsyncEngine, agent_id: uuid.UUID, timeout_seconds: float) -> AsyncIterator[None]:
    """Held on a connection of its own for the whole turn; released if the process dies (the session ends)."""
    key = lock_key(agent_id)
    started = time.perf_counter()
    async with engine.connect() as conn:
        try:
            await conn.execute(text("SELECT set_config('lock_timeout', :ms, true)"), {"ms": f"{max(int(timeout_seconds * 1000), 1)}ms"})
            await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            await conn.commit()
            LOCK_WAIT_SECONDS.labels("acquired").observe(time.perf_counter() - started)
        except DBAPIError as exc:
            await conn.rollback()
            if getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE or LOCK_NOT_AVAILABLE in str(exc.orig):
                LOCK_WAIT_SECONDS.labels("timed_out").observe(time.perf_counter() - started)
                retry = str(max(1, math.ceil(timeout_seconds / 4)))
                raise AgentBusy(
                    f"another turn of this agent is still running after {timeout_seconds:g}s; retry later",
                    headers={"Retry-After": retry},
                ) from None
            raise
        try:
            yield
        finally:
            try:
                await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                await conn.commit()
            except BaseException:
                # Never hand a connection that may still hold the lock back to the pool: closing it releases the lock.
                await conn.invalidate()
                raise
