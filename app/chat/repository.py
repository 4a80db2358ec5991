"""SQL for turns and their stored events."""

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat.events import Event, event_adapter
from app.chat.models import Turn, TurnEvent


class TurnRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add(self, turn: Turn) -> Turn:
        self.session.add(turn)
        await self.session.flush()
        return turn

    async def get(self, agent_id: uuid.UUID, turn_id: uuid.UUID) -> Turn | None:
        query = select(Turn).where(col(Turn.agent_id) == agent_id, col(Turn.id) == turn_id)
        return (await self.session.scalars(query)).first()

    async def by_idempotency_key(self, agent_id: uuid.UUID, key: str) -> Turn | None:
        query = select(Turn).where(col(Turn.agent_id) == agent_id, col(Turn.idempotency_key) == key)
        return (await self.session.scalars(query)).first()

    async def add_events(self, turn_id: uuid.UUID, agent_id: uuid.UUID, events: list[dict[str, Any]]) -> None:
        self.session.add_all([TurnEvent(turn_id=turn_id, seq=e["seq"], agent_id=agent_id, payload=e) for e in events])
        await self.session.flush()

    async def events(self, turn_id: uuid.UUID, after_seq: int = -1) -> list[Event]:
        """The turn's stored events after `after_seq`, in order, typed."""
        query = (
            select(TurnEvent)
            .where(col(TurnEvent.turn_id) == turn_id, col(TurnEvent.seq) > after_seq)
            .order_by(col(TurnEvent.seq))
        )
        return [event_adapter.validate_python(row.payload) for row in (await self.session.scalars(query)).all()]

    async def running(self) -> Sequence[Turn]:
        return (await self.session.scalars(select(Turn).where(col(Turn.status) == "running"))).all()
