import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, bindparam, delete, or_, select, text
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent

# Built once (every request looks its agent up): the statement's construction cost more than its compiled-cache hit.
_BY_ID = select(Agent).where(col(Agent.id) == bindparam("agent_id"))
_BY_ID_OF_TENANT = _BY_ID.where(col(Agent.tenant_id) == bindparam("tenant_id"))


class AgentRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def get(self, agent_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None, for_update: bool = False) -> Agent | None:
        """tenant_id: only an agent of this tenant (None: any, for internal callers that hold a checked id);
        for_update: locked until the transaction ends, against other changes of the agent (not its rows' writers)."""
        query, params = (
            (_BY_ID, {"agent_id": agent_id})
            if tenant_id is None
            else (_BY_ID_OF_TENANT, {"agent_id": agent_id, "tenant_id": tenant_id})
        )
        if for_update:
            # FOR NO KEY UPDATE: the writers of the agent's rows (every insert into a per-agent table) take the agent
            # FOR KEY SHARE through their foreign key, and must not wait for its holder, which may be waiting for them
            # (forgetting a message a passage being written cites: a deadlock). Its key never changes.
            query = query.with_for_update(key_share=True)
        return (await self.session.scalars(query, params)).first()

    async def named(self, tenant_id: uuid.UUID, name: str) -> Sequence[Agent]:
        query = select(Agent).where(col(Agent.tenant_id) == tenant_id, col(Agent.name) == name)
        return (await self.session.scalars(query.order_by(col(Agent.created_at), col(Agent.id)).limit(2))).all()

    async def every(self, tenant_id: uuid.UUID) -> Sequence[Agent]:
        query = select(Agent).where(col(Agent.tenant_id) == tenant_id).order_by(col(Agent.created_at), col(Agent.id))
        return (await self.session.scalars(query)).all()

    async def add(self, agent: Agent) -> Agent:
        self.session.add(agent)
        await self.session.flush()
        return agent

    async def delete(self, agent_id: uuid.UUID) -> None:
        # The agent's BM25 statistics first: its rows, deleted by the cascade, then find no corpus row and subtract
        # nothing (migration 0017), instead of updating the statistics once per row.
        for statistics in ("lexical_corpus", "lexical_terms"):
            await self.session.execute(text(f"DELETE FROM {statistics} WHERE agent_id = :a"), {"a": agent_id})
        await self.session.execute(delete(Agent).where(col(Agent.id) == agent_id))

    async def page(
        self, tenant_id: uuid.UUID, *, limit: int, after_key: tuple[datetime, uuid.UUID] | None, name: str | None = None
    ) -> Sequence[Agent]:
        """Oldest first; after_key is the (created_at, id) of the last agent of the previous page; `name`: only those
        with this name."""
        query = select(Agent).where(col(Agent.tenant_id) == tenant_id)
        if name is not None:
            query = query.where(col(Agent.name) == name)
        if after_key:
            created, row_id = after_key
            query = query.where(
                or_(col(Agent.created_at) > created, and_(col(Agent.created_at) == created, col(Agent.id) > row_id))
            )
        return (await self.session.scalars(query.order_by(col(Agent.created_at), col(Agent.id)).limit(limit))).all()
