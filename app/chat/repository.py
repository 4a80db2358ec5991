"""SQL for turns and their stored events."""

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat.events import Event, event_adapter
from app.chat.models import Turn, TurnEvent

RUNNING_PASS = "kind = 'memory_pass' AND status = 'running'"  # the partial unique index ux_turns_one_running_pass


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

    async def events(self, agent_id: uuid.UUID, turn_id: uuid.UUID, after_seq: int = -1) -> list[Event]:
        """The turn's stored events after `after_seq`, in order, typed."""
        query = (
            select(TurnEvent)
            .where(col(TurnEvent.agent_id) == agent_id, col(TurnEvent.turn_id) == turn_id, col(TurnEvent.seq) > after_seq)
            .order_by(col(TurnEvent.seq))
        )
        return [event_adapter.validate_python(row.payload) for row in (await self.session.scalars(query)).all()]

    async def add_pass(self, turn: Turn) -> bool:
        """Store a memory pass unless one of its agent is running already (False then)."""
        query = (
            insert(Turn)
            .values(**turn.model_dump())
            .on_conflict_do_nothing(index_elements=["agent_id"], index_where=text(RUNNING_PASS))
            .returning(col(Turn.id))
        )
        return (await self.session.execute(query)).first() is not None

    async def running_pass(self, agent_id: uuid.UUID) -> Turn | None:
        query = select(Turn).where(col(Turn.agent_id) == agent_id, text(RUNNING_PASS))
        return (await self.session.scalars(query)).first()

    async def last_pass_through(self, agent_id: uuid.UUID) -> int:
        """The last message the agent's memory passes have gone over (0: none yet)."""
        query = select(func.max(Turn.through_seq)).where(col(Turn.agent_id) == agent_id, col(Turn.kind) == "memory_pass")
        return int((await self.session.scalar(query)) or 0)

    async def running(self) -> Sequence[Turn]:
        return (await self.session.scalars(select(Turn).where(col(Turn.status) == "running"))).all()
