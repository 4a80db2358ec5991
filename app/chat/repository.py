"""SQL for turns, their stored events, and messages (recall memory)."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat.models import Message, Turn, TurnEvent
from app.memory.hybrid import Hit, hybrid_search


class TurnRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add(self, turn: Turn) -> Turn:
        self.session.add(turn)
        await self.session.flush()
        return turn

    async def get(self, agent_id: uuid.UUID, turn_id: uuid.UUID) -> Turn | None:
        query = select(Turn).where(Turn.agent_id == agent_id, Turn.id == turn_id)
        return (await self.session.scalars(query)).first()

    async def by_idempotency_key(self, agent_id: uuid.UUID, key: str) -> Turn | None:
        query = select(Turn).where(Turn.agent_id == agent_id, Turn.idempotency_key == key)
        return (await self.session.scalars(query)).first()

    async def add_events(self, turn_id: uuid.UUID, agent_id: uuid.UUID, events: list[dict[str, Any]]) -> None:
        self.session.add_all([TurnEvent(turn_id=turn_id, seq=e["seq"], agent_id=agent_id, payload=e) for e in events])
        await self.session.flush()

    async def events(self, turn_id: uuid.UUID, after_seq: int = -1) -> Sequence[TurnEvent]:
        query = select(TurnEvent).where(TurnEvent.turn_id == turn_id, TurnEvent.seq > after_seq).order_by(TurnEvent.seq)
        return (await self.session.scalars(query)).all()

    async def running(self) -> Sequence[Turn]:
        return (await self.session.scalars(select(Turn).where(Turn.status == "running"))).all()


class MessageRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add(self, message: Message) -> Message:
        self.session.add(message)
        await self.session.flush()
        return message

    async def since(self, agent_id: uuid.UUID, from_seq: int) -> list[Message]:
        """Messages with seq >= from_seq, oldest first."""
        query = select(Message).where(Message.agent_id == agent_id, Message.seq >= from_seq)
        return list((await self.session.scalars(query.order_by(Message.seq))).all())

    async def newest(
        self,
        agent_id: uuid.UUID,
        *,
        limit: int,
        before_seq: int | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
    ) -> Sequence[Message]:
        """Newest first; before_seq is the seq of the last message of the previous page."""
        query = select(Message).where(Message.agent_id == agent_id)
        if before_seq is not None:
            query = query.where(Message.seq < before_seq)
        if after:
            query = query.where(Message.created_at > after)
        if before:
            query = query.where(Message.created_at < before)
        return (await self.session.scalars(query.order_by(Message.seq.desc()).limit(limit))).all()

    async def search(
        self,
        agent_id: uuid.UUID,
        *,
        embedding: list[float],
        terms: list[str],
        k: int,
        below_seq: int | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
    ) -> list[tuple[Message, Hit]]:
        below = ["seq < :below_seq"] if below_seq is not None else []
        return await hybrid_search(
            self.session, Message, agent_id, embedding=embedding, terms=terms, k=k,
            where=["role IN ('user', 'assistant')", *below], params={"below_seq": below_seq}, after=after, before=before,
        )

    async def count(self, agent_id: uuid.UUID, *, before_seq: int) -> int:
        query = select(func.count()).select_from(Message).where(Message.agent_id == agent_id, Message.seq < before_seq)
        return int((await self.session.scalar(query)) or 0)
