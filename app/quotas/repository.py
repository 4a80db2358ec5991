"""SQL for the usage counters: atomic upserts, so that every replica counts in the same rows."""

import uuid
from datetime import datetime

from sqlalchemy import Boolean, and_, delete, literal_column, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.quotas.models import QuotaCounter

_KEY = ("scope", "subject_id", "metric", "window_start")


class CounterRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def take(
        self, scope: str, subject_id: uuid.UUID, metric: str, window_start: datetime, amount: int, limit: int | None
    ) -> int | None:
        """Add `amount` to the window's count unless that reached `limit` already; the new count, or None when refused.
        The row lock of the upsert serialises concurrent takers, on any replica."""
        row = {"scope": scope, "subject_id": subject_id, "metric": metric, "window_start": window_start}
        statement = (
            insert(QuotaCounter)
            .values(**row, used=amount)
            .on_conflict_do_update(
                index_elements=list(_KEY),
                set_={"used": col(QuotaCounter.used) + amount},
                where=None if limit is None else col(QuotaCounter.used) < limit,
            )
            .returning(col(QuotaCounter.used), literal_column("xmax = 0", Boolean))  # xmax = 0: the row was inserted
        )
        result = (await self.session.execute(statement)).first()
        if result is None:
            return None
        used, inserted = result
        if inserted:  # a new window: this subject's older ones of the metric are done with
            await self.session.execute(
                delete(QuotaCounter).where(
                    col(QuotaCounter.scope) == scope,
                    col(QuotaCounter.subject_id) == subject_id,
                    col(QuotaCounter.metric) == metric,
                    col(QuotaCounter.window_start) < window_start,
                )
            )
        return int(used)

    async def used(self, scope: str, subject_id: uuid.UUID, metric: str, window_start: datetime) -> int:
        query = select(col(QuotaCounter.used)).where(
            col(QuotaCounter.scope) == scope,
            col(QuotaCounter.subject_id) == subject_id,
            col(QuotaCounter.metric) == metric,
            col(QuotaCounter.window_start) == window_start,
        )
        return int(await self.session.scalar(query) or 0)

    async def tenants_in(self, windows: dict[str, datetime]) -> dict[tuple[uuid.UUID, str], int]:
        """Every tenant's count of each metric in that metric's given window."""
        current = or_(*(and_(col(QuotaCounter.metric) == m, col(QuotaCounter.window_start) == w) for m, w in windows.items()))
        query = select(QuotaCounter).where(col(QuotaCounter.scope) == "tenant", current)
        return {(r.subject_id, r.metric): r.used for r in (await self.session.scalars(query)).all()}
