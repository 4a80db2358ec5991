from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from app.agents.schemas import AgentCreate, AgentRead, AgentUpdate
from app.agents.service import AgentService
from app.api.deps import AgentDep, SessionDep, TenantDep
from app.api.errors import ERROR_RESPONSES
from app.pagination import Page

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses=ERROR_RESPONSES)


async def get_agent_service(session: SessionDep) -> AgentService:
    return AgentService(session)


AgentServiceDep = Annotated[AgentService, Depends(get_agent_service)]


@router.post("", status_code=201)
async def create_agent(spec: AgentCreate, agents: AgentServiceDep, principal: TenantDep) -> AgentRead:
    """Create an agent with its core memory blocks (default: `persona` and `human`)."""
    return await agents.create(principal.tenant_id, spec)


@router.get("")
async def list_agents(
    agents: AgentServiceDep,
    principal: TenantDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: str | None = None,
    name: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="only the agent with this name (names are unique per tenant): `items` holds it or is empty",
        ),
    ] = None,
) -> Page[AgentRead]:
    """List this tenant's agents, oldest first; `name` finds one by its name (find it, or create it on a first run)."""
    return await agents.page(principal.tenant_id, limit=limit, cursor=cursor, name=name)


@router.get("/{agent_id}")
async def get_agent(agent: AgentDep, agents: AgentServiceDep) -> AgentRead:
    """Read an agent and its core memory."""
    return await agents.read(agent)


@router.patch("/{agent_id}")
async def update_agent(agent: AgentDep, patch: AgentUpdate, agents: AgentServiceDep) -> AgentRead:
    """Change an agent's name, extra system instructions or model."""
    return await agents.update(agent, patch)


@router.delete("/{agent_id}", status_code=204)
async def delete_agent(agent: AgentDep, agents: AgentServiceDep) -> Response:
    """Delete an agent and all of its memory."""
    await agents.delete(agent)
    return Response(status_code=204)
