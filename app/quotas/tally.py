"""Use that no limit needs counted at once — every tenant's, while its quotas are off — added up in memory and
written to the same counters a second later, in one transaction: `GET /v1/admin/usage` shows every tenant's use
without a database write on each request. A process killed hard loses at most its last second of counts."""

import asyncio
import logging
import uuid
from collections import Counter
from datetime import datetime

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import transaction
from app.quotas.repository import CounterRepository

log = logging.getLogger("engram.quotas")
FLUSH_SECONDS = 1.0

Entry = tuple[str, uuid.UUID, str, datetime]  # scope, subject, metric, window start


class UsageTally:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]):
        self._sessions = sessions
        self._counts: Counter[Entry] = Counter()
        self._flushing: asyncio.Task[None] | None = None

    def add(self, entry: Entry, amount: int) -> None:
        self._counts[entry] += amount
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush_soon(), name="engram-usage-tally")

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)
        try:
            await self.flush()
        except Exception:  # the database is down: the counts wait for the next flush
            log.warning("could not write the usage counts; trying again with the next ones", exc_info=True)

    async def flush(self) -> None:
        """Write what was counted since the last flush (kept for the next one if the write fails)."""
        counts, self._counts = self._counts, Counter()
        if not counts:
            return
        try:
            async with transaction(self._sessions) as session:
                counters = CounterRepository(session)
                for (scope, subject, metric, start), amount in sorted(counts.items()):  # one lock order on every replica
                    await counters.take(scope, subject, metric, start, amount, None)
        except BaseException:
            self._counts.update(counts)
            raise

    async def flush_at_exit(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
        try:
            await self.flush()
        except Exception:
            log.warning("could not write the last usage counts at shut-down", exc_info=True)
