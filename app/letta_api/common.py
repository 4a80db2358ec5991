"""What every Letta route shares: Letta's prefixed ids, the agent a path names, and the 501 of what Engram lacks."""

import uuid
from collections.abc import Mapping
from typing import Annotated, Literal, TypeVar

from fastapi import Depends, Path, Request
from pydantic import BaseModel, ValidationError

from app.agents.models import Agent
from app.agents.service import find_agent
from app.api.deps import SessionDep, TenantDep
from app.errors import EngramError, NotFound, Unprocessable, format_validation
from app.runtime import runtime

Kind = Literal["agent", "block", "passage", "message", "tool", "run", "step"]
DOCS = "docs/letta.md"


class NotSupported(EngramError):
    """An endpoint of Letta's API Engram has no counterpart for: 501, saying what to do instead."""

    status_code = 501
    code = "not_supported"


class UnsupportedInput(Unprocessable):
    """A request of a supported endpoint asking for what Engram cannot do (shared blocks, agent tags): 422, saying
    what to do instead, as for any input Engram cannot take."""

    code = "not_supported"


def letta_id(kind: Kind, value: uuid.UUID) -> str:
    return f"{kind}-{value}"


def engram_id(kind: Kind, raw: str) -> uuid.UUID:
    """The UUID in Letta's `kind-<uuid>` (or a bare UUID). Anything else names nothing here: a 404, as an unknown id
    (Letta's SDK raises NotFoundError for both)."""
    text = raw.strip().removeprefix(f"{kind}-")
    try:
        return uuid.UUID(text)
    except ValueError:
        raise NotFound(f"no {kind} {raw!r}") from None


AgentIdPath = Annotated[str, Path(description="the agent's id: `agent-<uuid>` (or the bare uuid)")]


async def letta_agent(agent_id: AgentIdPath, session: SessionDep, principal: TenantDep) -> Agent:
    return await find_agent(session, engram_id("agent", agent_id), tenant_id=principal.tenant_id)


async def letta_agent_id(agent_id: AgentIdPath, request: Request, principal: TenantDep) -> uuid.UUID:
    """The agent, checked in a short session of its own: a turn must not hold a transaction open while it runs."""
    async with runtime(request.app).sessions() as session:
        return (await find_agent(session, engram_id("agent", agent_id), tenant_id=principal.tenant_id)).id


LettaAgentDep = Annotated[Agent, Depends(letta_agent)]
LettaAgentIdDep = Annotated[uuid.UUID, Depends(letta_agent_id)]

Model = TypeVar("Model", bound=BaseModel)


def engram_request(model: type[Model], data: Mapping[str, object]) -> Model:
    """One of Engram's own request bodies built from a Letta request: its rules apply, a breach is a 422."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Unprocessable(format_validation(exc.errors())) from None
