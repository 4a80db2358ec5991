"""Streaming read replicas (ENGRAM_DATABASE_REPLICA_URLS): where the reads that tolerate a second of lag go.

A replica's lag is measured, not trusted: every poll the primary's WAL position is noted with the time, and a replica
is as far behind as the newest noted position it has replayed is old. On an idle primary that is one poll; on a
standby whose stream broke (it replays nothing new while the primary writes) it grows, as it should. A replica that
does not answer, or lags past ENGRAM_REPLICA_MAX_LAG_SECONDS, is skipped until it is back within it. Only physical
standbys (`pg_is_in_recovery()`) are measured; a server that is not in recovery cannot say how far behind it is and
is never used.

Read-your-writes: a replica in use is at most `staleness_bound_seconds` behind, so a caller that wrote to an agent
within that time reads it on the primary (`note_write` / `wrote`, kept by the HTTP layer: app/api/replica_reads.py).
The rule holds within one process; behind a load balancer that spreads one caller's requests over several, a read
right after a write may land on another process and see the replica."""

import asyncio
import itertools
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import asyncpg_url, create_engine, session_factory
from app.metrics import REPLICA_LAG_SECONDS, REPLICA_USABLE

log = logging.getLogger("engram.replicas")

CHECK_TIMEOUT_SECONDS = 2.0
MAX_NOTED_WRITERS = 10_000  # past this many (caller, agent) pairs, those out of the window are dropped


def replica_name(url: str) -> str:
    """host:port/database, without credentials (for logs, metrics and /readyz)."""
    parsed = make_url(asyncpg_url(url))
    host = parsed.host or parsed.query.get("host") or "localhost"
    return f"{host}:{parsed.port or 5432}/{parsed.database or ''}"


@dataclass
class Replica:
    name: str
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    lag_seconds: float | None = None  # at the last check; None: not measured
    problem: str | None = "not checked yet"  # why it is skipped; None: usable
    checked_at: float = 0.0  # monotonic time of the last check that measured it

    def status(self) -> dict[str, Any]:
        lag = None if self.lag_seconds is None else round(self.lag_seconds, 3)
        return {"replica": self.name, "usable": self.problem is None, "lag_seconds": lag, "problem": self.problem}


@dataclass
class _WalSamples:
    """The primary's WAL position, noted at each poll (monotonic time, LSN), as far back as a lag worth measuring."""

    keep_seconds: float
    samples: deque[tuple[float, int]] = field(default_factory=deque)

    def note(self, at: float, lsn: int) -> None:
        self.samples.append((at, lsn))
        while len(self.samples) > 2 and self.samples[1][0] < at - self.keep_seconds:
            self.samples.popleft()

    def lag(self, replayed: int, now: float) -> float | None:
        """How far behind a replica that has replayed up to `replayed` is at most (None: further than kept)."""
        for at, lsn in reversed(self.samples):
            if lsn <= replayed:
                return max(now - at, 0.0)
        return None


class ReadReplicas:
    def __init__(self, urls: list[str], primary: AsyncEngine, *, max_lag_seconds: float, pool_size: int):
        self.primary = primary
        self.max_lag_seconds = max_lag_seconds
        self.poll_seconds = min(0.5, max_lag_seconds / 4)
        self.replicas = [
            Replica(replica_name(url), engine, session_factory(engine))
            for url in urls
            for engine in [create_engine(url, pool_size)]
        ]
        self._wal = _WalSamples(keep_seconds=max_lag_seconds * 4 + 1)
        self._turn = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._writes: dict[tuple[bytes | None, uuid.UUID | None], float] = {}

    @property
    def staleness_bound_seconds(self) -> float:
        """How far behind the primary a read on a replica in use can be: its lag may grow for a poll unseen."""
        return self.max_lag_seconds + self.poll_seconds

    def note_write(self, caller: bytes | None, agent_id: uuid.UUID | None) -> None:
        """`caller` (a key's digest; None: no key) has written to `agent_id` (None: to something not one agent's)."""
        now = time.monotonic()
        if len(self._writes) > MAX_NOTED_WRITERS:
            self._writes = {k: at for k, at in self._writes.items() if at > now - self.staleness_bound_seconds}
        self._writes[(caller, agent_id)] = now

    def wrote(self, caller: bytes | None, agent_id: uuid.UUID | None) -> bool:
        """Whether a read by `caller` of `agent_id` (None: of no one agent) could miss its own write on a replica."""
        since = time.monotonic() - self.staleness_bound_seconds
        if agent_id is None:
            return any(at > since for (who, _), at in self._writes.items() if who == caller)
        return any(self._writes.get(key, 0.0) > since for key in ((caller, agent_id), (caller, None)))

    def pick(self) -> Replica | None:
        """A usable replica, in turn (None: none is; the primary serves). Usable: within the maximum lag at its last
        check, and that check recent enough that it cannot have fallen further than the staleness bound since (a
        check that stalls, the primary slow to answer, say, must not leave an old verdict standing)."""
        now = time.monotonic()
        usable = [
            r
            for r in self.replicas
            if r.problem is None and (r.lag_seconds or 0.0) + (now - r.checked_at) <= self.staleness_bound_seconds
        ]
        return usable[next(self._turn) % len(usable)] if usable else None

    def failed(self, replica: Replica, error: BaseException) -> None:
        """A request found the replica unreachable: skipped from now until a check finds it back."""
        self._set(replica, problem=f"unreachable: {type(error).__name__}", lag=replica.lag_seconds)

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="engram-replicas")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for replica in self.replicas:
            await replica.engine.dispose()

    def status(self) -> list[dict[str, Any]]:
        return [r.status() for r in self.replicas]

    async def check(self) -> None:
        """Notes the primary's WAL position, then measures each replica against what was noted."""
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_SECONDS), self.primary.connect() as conn:
                lsn = (await conn.execute(text("SELECT pg_current_wal_lsn() - '0/0'"))).scalar_one()
            self._wal.note(time.monotonic(), int(lsn))
        except Exception:  # the primary down: its writes stop too, so the last samples still bound the lag
            log.debug("could not read the primary's WAL position", exc_info=True)
        await asyncio.gather(*(self._measure(r) for r in self.replicas))

    async def _measure(self, replica: Replica) -> None:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_SECONDS), replica.engine.connect() as conn:
                row = (await conn.execute(text("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn() - '0/0'"))).one()
        except Exception as exc:
            self._set(replica, problem=f"unreachable: {type(exc).__name__}", lag=None)
            return
        in_recovery, replayed = row
        if not in_recovery:
            self._set(replica, problem="not a standby (pg_is_in_recovery() is false): its lag cannot be known", lag=None)
            return
        lag = self._wal.lag(int(replayed or 0), time.monotonic())
        if lag is None or lag > self.max_lag_seconds:
            shown = "more than " + str(self._wal.keep_seconds) if lag is None else f"{lag:.2f}"
            self._set(
                replica, problem=f"lagging: {shown} s behind (ENGRAM_REPLICA_MAX_LAG_SECONDS={self.max_lag_seconds:g})", lag=lag
            )
        else:
            self._set(replica, problem=None, lag=lag)

    def _set(self, replica: Replica, *, problem: str | None, lag: float | None) -> None:
        if (problem is None) != (replica.problem is None) and replica.problem != "not checked yet":
            log.warning("read replica %s: %s", replica.name, f"{problem}; reads go to the primary" if problem else "back in use")
        replica.problem, replica.lag_seconds = problem, lag
        if lag is not None:
            replica.checked_at = time.monotonic()
        REPLICA_USABLE.labels(replica.name).set(problem is None)
        if lag is not None:
            REPLICA_LAG_SECONDS.labels(replica.name).set(lag)

    async def _watch(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.poll_seconds)
