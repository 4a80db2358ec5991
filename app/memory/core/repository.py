"""SQL of core memory blocks and their revisions."""

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.memory.models import MemoryBlock, MemoryBlockRevision

# Rows are read without their vectors: nothing outside SQL uses them, and turning 384 floats per row into Python


class BlockRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def of_agents(self, agent_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[MemoryBlock]]:
        """The blocks of several agents in one query, by agent, each list ordered by label."""
        query = select(MemoryBlock).where(col(MemoryBlock.agent_id).in_(agent_ids)).order_by(col(MemoryBlock.label))
        by_agent: dict[uuid.UUID, list[MemoryBlock]] = {agent_id: [] for agent_id in agent_ids}
        for block in (await self.session.scalars(query)).all():
            by_agent[block.agent_id].append(block)
        return by_agent

    async def of_agent(self, agent_id: uuid.UUID) -> Sequence[MemoryBlock]:
        query = select(MemoryBlock).where(col(MemoryBlock.agent_id) == agent_id).order_by(col(MemoryBlock.label))
        return (await self.session.scalars(query)).all()

    async def get(self, agent_id: uuid.UUID, label: str, *, for_update: bool = False) -> MemoryBlock | None:
        query = select(MemoryBlock).where(col(MemoryBlock.agent_id) == agent_id, col(MemoryBlock.label) == label)
        if for_update:
            # populate_existing: a row read earlier in this session must not hide a newer committed version.
            query = query.with_for_update().execution_options(populate_existing=True)
        return (await self.session.scalars(query)).first()

    async def add(self, block: MemoryBlock) -> MemoryBlock:
        self.session.add(block)
        await self.session.flush()
        return block

    async def add_revision(self, revision: MemoryBlockRevision) -> None:
        self.session.add(revision)
        await self.session.flush()

    async def as_of(self, agent_id: uuid.UUID, moment: datetime) -> list[tuple[MemoryBlock, MemoryBlockRevision]]:
        """Each of the agent's blocks that had a revision by `moment`, with the newest such revision, by label."""
        query = (
            select(MemoryBlock, MemoryBlockRevision)
            .join(
                MemoryBlockRevision,
                (col(MemoryBlockRevision.agent_id) == col(MemoryBlock.agent_id))
                & (col(MemoryBlockRevision.block_id) == col(MemoryBlock.id)),
            )
            .where(col(MemoryBlock.agent_id) == agent_id, col(MemoryBlockRevision.created_at) <= moment)
            .order_by(col(MemoryBlock.label), col(MemoryBlockRevision.version).desc())
            .ext(distinct_on(col(MemoryBlock.label)))
        )
        return [(block, revision) for block, revision in (await self.session.execute(query)).all()]

    async def history(self, block: MemoryBlock) -> Sequence[MemoryBlockRevision]:
        query = (
            select(MemoryBlockRevision)
            .where(col(MemoryBlockRevision.agent_id) == block.agent_id, col(MemoryBlockRevision.block_id) == block.id)
            .order_by(col(MemoryBlockRevision.version).desc())
        )
        return (await self.session.scalars(query)).all()
