import uuid
from collections.abc import Sequence

from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.agents.repository import AgentRepository
from app.agents.schemas import AgentCreate, AgentRead, AgentUpdate, default_blocks
from app.errors import Conflict, NotFound, Unprocessable
from app.memory.core.service import CoreMemory
from app.models_base import utcnow
from app.pagination import Page, decode_time_cursor, split_page


async def find_agent(session: AsyncSession, agent_id: uuid.UUID, *, tenant_id: uuid.UUID | None) -> Agent:
    """The one agent lookup, and the tenant check that is the security boundary: another tenant's agent is a 404
    like a missing one (a 403 would confirm that it exists). tenant_id None: internal callers holding a checked id."""
    agent = await AgentRepository(session).get(agent_id, tenant_id=tenant_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id}")
    return agent


async def find_agent_by_reference(session: AsyncSession, reference: str, *, tenant_id: uuid.UUID) -> Agent:
    """An agent named by its id or, failing that, by its name (OpenAI clients name their `model`); a name two
    agents share is refused rather than guessed."""
    try:
        return await find_agent(session, uuid.UUID(reference), tenant_id=tenant_id)
    except ValueError:
        pass
    found = await AgentRepository(session).named(tenant_id, reference)
    if not found:
        raise NotFound(f"no agent with the id or name {reference!r}")
    if len(found) > 1:
        raise Conflict(f"more than one agent is named {reference!r}: use its id")
    return found[0]


async def name_taken(session: AsyncSession, tenant_id: uuid.UUID, name: str) -> bool:
    return bool(await AgentRepository(session).named(tenant_id, name))


async def tenant_agents(session: AsyncSession, tenant_id: uuid.UUID) -> Sequence[Agent]:
    return await AgentRepository(session).every(tenant_id)


async def running_agent(session: AsyncSession, agent_id: uuid.UUID) -> Agent | None:
    """The agent of a running turn, or None once it has been deleted (the turn then stops)."""
    return await AgentRepository(session).get(agent_id)


async def move_context_start(session: AsyncSession, agent_id: uuid.UUID, summary: str, start_seq: int) -> Agent | None:
    """Messages before start_seq leave the LLM context for `summary` (None: the agent has been deleted)."""
    agents = AgentRepository(session)
    agent = await agents.get(agent_id, for_update=True)
    if agent is None:
        return None
    agent.summary, agent.context_start_seq = summary, start_seq
    return await agents.add(agent)


async def erasing_from_context(session: AsyncSession, agent_id: uuid.UUID) -> Agent:
    """The agent, locked until the transaction ends, whose conversation a message is being erased from: its
    `updated_at` moves on, which tells every process to read its context again (app/chat/context_messages.py).
    The caller may replace its summary."""
    agents = AgentRepository(session)
    agent = await agents.get(agent_id, for_update=True)
    if agent is None:
        raise NotFound(f"no agent {agent_id}")
    agent.updated_at = utcnow()
    return await agents.add(agent)


class AgentService:
    def __init__(self, session: AsyncSession):
        self.agents = AgentRepository(session)
        self.core = CoreMemory(session)

    async def create(self, tenant_id: uuid.UUID, spec: AgentCreate) -> AgentRead:
        await self._name_free(tenant_id, spec.name)
        agent = await self.agents.add(Agent(tenant_id=tenant_id, name=spec.name, system=spec.system, model=spec.model))
        await self.core.create_blocks(agent.id, spec.blocks if spec.blocks is not None else default_blocks())
        return await self.read(agent)

    async def read(self, agent: Agent) -> AgentRead:
        return AgentRead.of(agent, blocks=await self.core.blocks_of(agent.id))

    async def update(self, agent: Agent, patch: AgentUpdate) -> AgentRead:
        changes = patch.model_dump(exclude_unset=True)
        if "name" in changes and changes["name"] is None:
            raise Unprocessable("name cannot be null")
        if changes.get("name", agent.name) != agent.name:
            await self._name_free(agent.tenant_id, changes["name"])
        for field, value in changes.items():
            setattr(agent, field, value)
        agent.updated_at = utcnow()
        await self.agents.add(agent)
        return await self.read(agent)

    async def _name_free(self, tenant_id: uuid.UUID, name: str) -> None:
        """Agents are reached by name (an OpenAI `model`, the CLI, Letta's SDK): one name, one agent per tenant."""
        if await self.agents.named(tenant_id, name):
            raise Conflict(f"an agent named {name!r} exists: choose another name (agents are also reached by name)")

    async def delete(self, agent: Agent) -> None:
        await self.agents.delete(agent.id)

    async def page(self, tenant_id: uuid.UUID, *, limit: int, cursor: str | None, name: str | None = None) -> Page[AgentRead]:
        after_key = decode_time_cursor(cursor) if cursor else None
        rows = await self.agents.page(tenant_id, limit=limit + 1, after_key=after_key, name=name)
        page, next_cursor = split_page(rows, limit, lambda a: (a.created_at, a.id))
        blocks = await self.core.blocks.of_agents([a.id for a in page])
        return Page[AgentRead](items=[AgentRead.of(a, blocks=blocks[a.id]) for a in page], next_cursor=next_cursor)
