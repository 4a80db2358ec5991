"""Letta's agents: create, list, retrieve, modify, delete, export to and import from an agent file (`.af`), and the
health check; over AgentService, CoreMemory and portability."""

import json
import uuid
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import JSONResponse

from app import __version__
from app.agents.models import Agent
from app.agents.schemas import AgentCreate as EngramAgentCreate
from app.agents.schemas import AgentRead
from app.agents.schemas import AgentUpdate as EngramAgentUpdate
from app.agents.service import AgentService, tenant_agents
from app.api.deps import CoreMemoryDep, EmbedderDep, SessionDep, SettingsDep, TenantDep
from app.api.errors import ERROR_RESPONSES
from app.chat.tools import CHAT_TOOLS
from app.errors import Unprocessable
from app.letta_api.common import LettaAgentDep, UnsupportedInput, engram_request, letta_id
from app.letta_api.paging import LettaPage, paging
from app.letta_api.schemas import (
    LettaAgentCreate,
    LettaAgentState,
    LettaAgentUpdate,
    LettaBlock,
    LettaBlockCreate,
    LettaDeleted,
    LettaEmbeddingConfig,
    LettaHealth,
    LettaImportedAgents,
    LettaTool,
)
from app.llm.embeddings import Embedder
from app.memory.core.service import CoreMemory
from app.memory.schemas import DEFAULT_BLOCK_LIMIT, MAX_BLOCK_LIMIT
from app.portability.agent_file import to_agent_file
from app.portability.service import export_agent, import_document, read_upload, without_messages
from app.settings import Settings

router = APIRouter(prefix="/v1", tags=["letta"], responses=ERROR_RESPONSES)
SHARED_BLOCKS = "block_ids: Engram's blocks belong to one agent; give their values in memory_blocks (docs/letta.md)"
TOOL_NAMESPACE = uuid.UUID("6f1d3c4e-2b8a-4e0f-9a57-3c1e8d2b7a60")  # Engram's tools' stable Letta ids


def engram_tools() -> list[LettaTool]:
    """Engram's own tools, the ones every agent has, in Letta's shape."""
    return [
        LettaTool(
            id=letta_id("tool", uuid.uuid5(TOOL_NAMESPACE, schema["function"]["name"])),
            name=schema["function"]["name"],
            description=schema["function"]["description"],
            json_schema=schema["function"],
        )
        for schema in CHAT_TOOLS.schemas
    ]


class AgentStates:
    """An agent as Letta's AgentState: its blocks, Engram's tools, and what serves it (model and embedder)."""

    def __init__(self, core: CoreMemory, settings: Settings, embedder: Embedder):
        self.core, self.settings, self.embedder = core, settings, embedder

    async def of(self, agent: Agent | AgentRead) -> LettaAgentState:
        blocks = [LettaBlock.of(b) for b in await self.core.blocks_of(agent.id)]
        model = agent.model or self.settings.default_llm_model
        embedding = LettaEmbeddingConfig(
            embedding_model=self.embedder.model, embedding_dim=self.embedder.dim, handle=self.embedder.model
        )
        return LettaAgentState.of(
            agent,
            blocks,
            engram_tools(),
            model=model,
            context_window=self.settings.context_window_for(model),
            embedding=embedding,
        )


async def get_states(core: CoreMemoryDep, settings: SettingsDep, embedder: EmbedderDep) -> AgentStates:
    return AgentStates(core, settings, embedder)


def get_agent_service(session: SessionDep) -> AgentService:
    return AgentService(session)


StatesDep = Annotated[AgentStates, Depends(get_states)]
AgentServiceDep = Annotated[AgentService, Depends(get_agent_service)]


@router.get("/health/")
async def health() -> LettaHealth:
    """Liveness, as Letta answers it (no key needed)."""
    return LettaHealth(version=__version__)


@router.post("/agents/")
async def create_agent(
    body: LettaAgentCreate, agents: AgentServiceDep, states: StatesDep, principal: TenantDep
) -> LettaAgentState:
    """Create an agent with its memory blocks (none unless given, as in Letta). Its model and embedder are the
    server's: `model`, `embedding`, `llm_config`, `tools` and the rest of Letta's settings are accepted and ignored."""
    if body.block_ids:
        raise UnsupportedInput(SHARED_BLOCKS)
    spec = engram_request(
        EngramAgentCreate,
        {
            "name": body.name or f"letta-agent-{uuid.uuid4().hex[:8]}",
            "system": body.system,
            "blocks": [_block(b) for b in body.memory_blocks or []],
        },
    )
    return await states.of(await agents.create(principal.tenant_id, spec))


def _block(block: LettaBlockCreate) -> dict[str, object]:
    """Engram's block; without a limit, Engram's default unless the value is longer (Letta's default is larger)."""
    limit = block.limit or min(max(DEFAULT_BLOCK_LIMIT, len(block.value)), MAX_BLOCK_LIMIT)
    return {
        "label": block.label,
        "value": block.value,
        "limit": limit,
        "description": block.description,
        "read_only": block.read_only,
    }


@router.get("/agents/")
async def list_agents(
    session: SessionDep,
    states: StatesDep,
    principal: TenantDep,
    page: Annotated[LettaPage, paging("desc", default_limit=50, ascending=True)],
    name: Annotated[str | None, Query(description="only agents of this name")] = None,
    query_text: Annotated[str | None, Query(description="only agents whose name contains this")] = None,
    tags: Annotated[list[str] | None, Query(description="not supported: Engram's agents carry no tags")] = None,
) -> list[LettaAgentState]:
    """The tenant's agents, newest first unless `order=asc`."""
    if tags:
        raise UnsupportedInput("tags: Engram's agents carry no tags; filter by name or query_text (docs/letta.md)")
    agents: Sequence[Agent] = await tenant_agents(session, principal.tenant_id)  # oldest first
    if name is not None:
        agents = [a for a in agents if a.name == name]
    if query_text:
        agents = [a for a in agents if query_text.casefold() in a.name.casefold()]
    return [await states.of(agent) for agent in page.cut(agents, lambda a: a.id, "agent")]


# The SDK names these with a trailing slash; the same without one (as other clients may send them) lands here too,
# not on the 501 catch-all.
router.add_api_route("/health", health, methods=["GET"], include_in_schema=False)
router.add_api_route("/agents", create_agent, methods=["POST"], include_in_schema=False)
router.add_api_route("/agents", list_agents, methods=["GET"], include_in_schema=False)


@router.get("/agents/{agent_id}")
async def retrieve_agent(agent: LettaAgentDep, states: StatesDep) -> LettaAgentState:
    """The agent with its blocks (Letta's `include` is accepted and ignored: blocks and tools always come)."""
    return await states.of(agent)


@router.patch("/agents/{agent_id}")
async def modify_agent(
    agent: LettaAgentDep, body: LettaAgentUpdate, agents: AgentServiceDep, states: StatesDep
) -> LettaAgentState:
    """Rename the agent or change its instructions (`system`); Letta's other settings are accepted and ignored."""
    if body.block_ids:
        raise UnsupportedInput(SHARED_BLOCKS + "; change a block with PATCH …/core-memory/blocks/{label}")
    changes = {field: value for field, value in (("name", body.name), ("system", body.system)) if value is not None}
    read = await agents.update(agent, engram_request(EngramAgentUpdate, changes))
    return await states.of(read)


@router.delete("/agents/{agent_id}")
async def delete_agent(agent: LettaAgentDep, agents: AgentServiceDep) -> LettaDeleted:
    """Delete the agent and everything it remembers."""
    await agents.delete(agent)
    return LettaDeleted(message=f"Agent id={letta_id('agent', agent.id)} successfully deleted")


@router.get("/agents/{agent_id}/export")
async def export_agent_file(
    agent: LettaAgentDep,
    session: SessionDep,
    states: StatesDep,
    scrub_messages: Annotated[bool, Query(description="leave the conversation out")] = False,
) -> JSONResponse:
    """The agent as a Letta agent file (`.af`): blocks, conversation (with what is in context), and the current
    archival passages (Engram's addition). `use_legacy_format` and `max_steps` are accepted and ignored."""
    document = await export_agent(session, agent, states.embedder, embeddings=False)
    model = agent.model or states.settings.default_llm_model
    agent_file = to_agent_file(
        document,
        model=model,
        context_window=states.settings.context_window_for(model),
        embedding_model=states.embedder.model,
        embedding_dim=states.embedder.dim,
        messages=not scrub_messages,
    )
    return JSONResponse(agent_file)


@router.post("/agents/import")
async def import_agent_file(
    session: SessionDep,
    embedder: EmbedderDep,
    principal: TenantDep,
    file: Annotated[UploadFile, File(description="a Letta agent file (.af), or an Engram export")],
    name: Annotated[str | None, Form(min_length=1, max_length=200)] = None,
    override_name: Annotated[str | None, Form(min_length=1, max_length=200)] = None,
    append_copy_suffix: Annotated[bool, Form()] = False,
    strip_messages: Annotated[bool, Form()] = False,
) -> LettaImportedAgents:
    """Import the file as a new agent (its first agent, for a file of several). A name the tenant already uses is
    refused (409): pass `name`, or `append_copy_suffix`. Letta's other form fields are accepted and ignored."""
    try:
        upload = json.loads(await file.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unprocessable(f"the file is not JSON: {exc}") from None
    document, report = read_upload(upload)
    if strip_messages:
        document = without_messages(document)
    chosen = name or override_name or document.agent.name
    if append_copy_suffix:
        chosen = f"{chosen}_copy"[:200]
    result = await import_document(session, principal.tenant_id, document, embedder, name=chosen, report=report)
    return LettaImportedAgents(agent_ids=[letta_id("agent", result.agent.id)])
