"""SQL of export and import: an agent's rows read whole (vectors included, unlike the memory repositories, which
leave vectors in the database), and written in bulk inside the caller's transaction."""

import uuid
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.chat.models import Turn, TurnEvent
from app.memory.models import ArchivalPassage, MemoryBlock, MemoryBlockRevision, Message


class PortabilityRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def blocks(self, agent_id: uuid.UUID) -> Sequence[MemoryBlock]:
        query = select(MemoryBlock).where(col(MemoryBlock.agent_id) == agent_id).order_by(col(MemoryBlock.label))
        return (await self.session.scalars(query)).all()

    async def revisions(self, agent_id: uuid.UUID) -> Sequence[MemoryBlockRevision]:
        """Of each of the agent's blocks, oldest first within each."""
        query = (
            select(MemoryBlockRevision)
            .where(col(MemoryBlockRevision.agent_id) == agent_id)
            .order_by(col(MemoryBlockRevision.block_id), col(MemoryBlockRevision.version))
        )
        return (await self.session.scalars(query)).all()

    async def passages(self, agent_id: uuid.UUID) -> Sequence[ArchivalPassage]:
        query = (
            select(ArchivalPassage)
            .where(col(ArchivalPassage.agent_id) == agent_id)
            .order_by(col(ArchivalPassage.created_at), col(ArchivalPassage.id))
        )
        return (await self.session.scalars(query)).all()

    async def messages(self, agent_id: uuid.UUID) -> Sequence[Message]:
        query = select(Message).where(col(Message.agent_id) == agent_id).order_by(col(Message.seq))
        return (await self.session.scalars(query)).all()

    async def messages_before(self, agent_id: uuid.UUID, seq: int) -> int:
        query = select(func.count()).select_from(Message).where(col(Message.agent_id) == agent_id, col(Message.seq) < seq)
        return int((await self.session.scalar(query)) or 0)

    async def turns(self, agent_id: uuid.UUID) -> Sequence[Turn]:
        query = select(Turn).where(col(Turn.agent_id) == agent_id).order_by(col(Turn.created_at), col(Turn.id))
        return (await self.session.scalars(query)).all()

    async def events(self, agent_id: uuid.UUID) -> Sequence[TurnEvent]:
        query = select(TurnEvent).where(col(TurnEvent.agent_id) == agent_id).order_by(col(TurnEvent.turn_id), col(TurnEvent.seq))
        return (await self.session.scalars(query)).all()

    async def add(self, agent: Agent) -> Agent:
        self.session.add(agent)
        await self.session.flush()
        return agent

    async def add_all(self, rows: Sequence[object]) -> None:
        """One flush for many rows (an import's; its passages and messages are archival and recall memory's to store)."""
        self.session.add_all(rows)
        await self.session.flush()
