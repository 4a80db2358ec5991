"""One turn at a time per agent, across every process on the database: a session-level advisory lock.

Turns of one agent waiting in the same process queue on an in-memory lock first, so that a burst of chats to one
agent holds one database connection, not one per waiting request."""

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.errors import Conflict
from app.metrics import LOCK_WAIT_SECONDS

LOCK_NOT_AVAILABLE = "55P03"


def lock_key(agent_id: uuid.UUID) -> int:
    """The key of the agent's turn lock."""
    return int.from_bytes(agent_id.bytes[:8], "big", signed=True)


def pass_lock_key(agent_id: uuid.UUID) -> int:
    """The key held by the agent's memory pass while it runs (it never takes the turn lock)."""
    return int.from_bytes(agent_id.bytes[8:], "big", signed=True)


def lock_key_of(kind: str, agent_id: uuid.UUID) -> int:
    """The lock a live process holds while it runs a turn of this kind."""
    return pass_lock_key(agent_id) if kind == "memory_pass" else lock_key(agent_id)


class AgentBusy(Conflict):
    code = "agent_busy"


def _busy(timeout_seconds: float, started: float) -> AgentBusy:
    LOCK_WAIT_SECONDS.labels("timed_out").observe(time.perf_counter() - started)
    return AgentBusy(
        f"another turn of this agent is still running after {timeout_seconds:g}s; retry later",
        headers={"Retry-After": str(max(1, math.ceil(timeout_seconds / 4)))},
    )


class AgentLocks:
    def __init__(self, engine: AsyncEngine, key: Callable[[uuid.UUID], int] = lock_key):
        self.engine = engine
        self.key = key
        self._local: dict[uuid.UUID, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, agent_id: uuid.UUID, timeout_seconds: float) -> AsyncIterator[None]:
        started = time.perf_counter()
        lock, users = self._local.get(agent_id, (asyncio.Lock(), 0))
        self._local[agent_id] = (lock, users + 1)
        try:
            try:
                async with asyncio.timeout(timeout_seconds):
                    await lock.acquire()
            except TimeoutError:
                raise _busy(timeout_seconds, started) from None
            try:
                left = max(timeout_seconds - (time.perf_counter() - started), 0.001)
                async with _advisory_lock(self.engine, self.key(agent_id), left, started, timeout_seconds):
                    yield
            finally:
                lock.release()
        finally:
            lock, users = self._local[agent_id]
            if users <= 1:
                del self._local[agent_id]
            else:
                self._local[agent_id] = (lock, users - 1)


@asynccontextmanager
async def _advisory_lock(
    engine: AsyncEngine, key: int, wait_seconds: float, started: float, timeout_seconds: float
) -> AsyncIterator[None]:
    """Held on a connection of its own for the whole turn; released if the process dies (the session ends).

    In autocommit (a session-level lock needs no transaction) and tried first without waiting: an agent's turn
    usually finds its lock free, and then taking and releasing it is two statements, not the seven of a wait in a
    transaction (BEGIN, the timeout, the lock, COMMIT, and BEGIN, the unlock, COMMIT to release)."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            if not (await conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key})).scalar():
                await _wait_for(conn, key, wait_seconds)
        except BaseException as exc:
            # A wait that timed out, failed or was cancelled may leave the lock (granted as the cancel arrived) or the
            # wait's timeout on the connection: closed, it keeps neither.
            await conn.invalidate()
            if isinstance(exc, DBAPIError) and (
                getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE or LOCK_NOT_AVAILABLE in str(exc.orig)
            ):
                raise _busy(timeout_seconds, started) from None
            raise
        LOCK_WAIT_SECONDS.labels("acquired").observe(time.perf_counter() - started)
        try:
            yield
        finally:
            try:
                await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
            except BaseException:
                # Never hand a connection that may still hold the lock back to the pool: closing it releases the lock.
                await conn.invalidate()
                raise


async def _wait_for(conn: AsyncConnection, key: int, wait_seconds: float) -> None:
    """Waits for the lock at most `wait_seconds` (a session lock_timeout, reset once the lock is taken)."""
    await conn.execute(text("SELECT set_config('lock_timeout', :ms, false)"), {"ms": f"{max(int(wait_seconds * 1000), 1)}ms"})
    await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
    await conn.execute(text("RESET lock_timeout"))
