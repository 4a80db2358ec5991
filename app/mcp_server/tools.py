"""Engram's MCP tools and its one resource, each a method of EngramTools: the caller a request acts for comes from
`caller_of` (per HTTP request, or the stdio process), and every tool reaches an agent as the HTTP routes do."""

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import Field, ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.agents.service import find_agent, tenant_agents
from app.api.deps import quota_meter
from app.auth.principal import Principal
from app.chat.schemas import MAX_MESSAGE_CHARS, ChatResponse
from app.db import reading, transaction
from app.errors import EngramError, NotFound
from app.mcp_server.schemas import (
    AgentList,
    AgentSummary,
    ChatReply,
    ConversationHit,
    ConversationHits,
    CoreMemoryBlocks,
    PassageList,
)
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.core.service import CoreMemory
from app.memory.recall.service import RecallMemory
from app.memory.recollection.recollector import Recollector
from app.memory.recollection.schemas import RecollectionRead, RecollectionRequest, recollected
from app.memory.recollection.selection import MAX_BUDGET_CHARS
from app.memory.schemas import (
    LABEL_PATTERN,
    MAX_BLOCK_LIMIT,
    MAX_BLOCKS,
    MAX_PASSAGE_CHARS,
    MAX_QUERY_CHARS,
    MAX_SOURCES,
    MAX_TAGS,
    BlockRead,
    NonBlank,
    PassageRead,
)
from app.memory.search.query import SearchQuery
from app.runtime import Runtime


@dataclass(frozen=True)
class Caller:
    """Who a tool call acts for, and with what."""

    runtime: Runtime
    principal: Principal


CallerOf = Callable[[Context], Caller]

AgentId = Annotated[uuid.UUID, Field(description="the agent's id (from list_agents)")]
Label = Annotated[str, Field(pattern=LABEL_PATTERN, description="the block's label, e.g. `human` or `persona`")]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for, in any language")]
K = Annotated[int, Field(ge=1, le=100, description="at most this many results")]


def _tool_error(exc: EngramError) -> Exception:
    return ToolError(f"{exc.code}: {exc.detail}")


def _resource_error(exc: EngramError) -> Exception:
    return ResourceNotFoundError(exc.detail) if isinstance(exc, NotFound) else ResourceError(exc.detail)


@asynccontextmanager
async def _agent_scope(
    caller: Caller, agent_id: uuid.UUID, fail: Callable[[EngramError], Exception] = _tool_error, *, reads_only: bool = False
) -> AsyncIterator[tuple[AsyncSession, Agent]]:
    """One transaction (`reads_only`: none, each statement on its own, as the HTTP API reads: nothing stays open while
    a query is embedded), and the agent looked up for the caller's tenant exactly as the HTTP routes do (another
    tenant's agent is not found); Engram's errors become the MCP error the model or client reads."""
    try:
        async with (reading if reads_only else transaction)(caller.runtime.sessions) as session:
            yield session, await find_agent(session, agent_id, tenant_id=caller.principal.tenant_id)
    except EngramError as exc:
        raise fail(exc) from exc


class EngramTools:
    """The tools (their docstrings and parameters are what the client's model reads) and the core memory resource."""

    def __init__(self, caller_of: CallerOf):
        self.caller_of = caller_of

    async def list_agents(self, ctx: Context) -> AgentList:
        """List the agents you can use, with their ids. Every other tool takes an agent's id: call this first when
        you do not have one."""
        caller = self.caller_of(ctx)
        async with reading(caller.runtime.sessions) as session:
            agents = await tenant_agents(session, caller.principal.tenant_id)
        return AgentList(agents=[AgentSummary(id=a.id, name=a.name, created_at=a.created_at) for a in agents])

    async def read_core_memory(self, agent_id: AgentId, ctx: Context) -> CoreMemoryBlocks:
        """Read an agent's core memory: the few short blocks it sees in every conversation (e.g. `persona`: who the
        agent is; `human`: what it knows about its user). Each block has a label, its value, a character limit and
        a version; pass that version as `expected_version` to edit_core_memory_block so that an edit made since
        you read it is not overwritten."""
        async with _agent_scope(self.caller_of(ctx), agent_id, reads_only=True) as (session, agent):
            return CoreMemoryBlocks(blocks=[BlockRead.of(b) for b in await CoreMemory(session).blocks_of(agent.id)])

    async def edit_core_memory_block(
        self,
        agent_id: AgentId,
        label: Label,
        value: Annotated[str, Field(description="the block's complete new text (it replaces the old value)")],
        ctx: Context,
        expected_version: Annotated[
            int | None, Field(ge=0, description="the version you read; the edit is refused if the block has changed since")
        ] = None,
        limit: Annotated[
            int | None, Field(ge=1, le=MAX_BLOCK_LIMIT, description="a new character limit for the block, if it must grow")
        ] = None,
    ) -> BlockRead:
        """Rewrite one of an agent's core memory blocks. This replaces the whole value, it does not append: send the
        complete new text, keeping what should stay. The agent reads core memory in every conversation, so keep it
        short and factual; put longer or occasional facts into archival memory (insert_archival_memory). Give
        `expected_version` (from read_core_memory) to be safe against concurrent edits: if the block has moved on,
        the edit is refused; read it again and redo the edit. Only existing blocks can be edited. Returns the block
        with its new version."""
        async with _agent_scope(self.caller_of(ctx), agent_id) as (session, agent):
            core = CoreMemory(session)
            block = await core.write(agent.id, label, value, source="api", expected_version=expected_version, limit=limit)
            return BlockRead.of(block)

    async def insert_archival_memory(
        self,
        agent_id: AgentId,
        content: Annotated[NonBlank, Field(min_length=1, max_length=MAX_PASSAGE_CHARS, description="the passage to store")],
        ctx: Context,
        tags: Annotated[
            list[str] | None, Field(max_length=MAX_TAGS, description="optional lower-case tags, to filter searches by later")
        ] = None,
        sources: Annotated[
            list[uuid.UUID] | None,
            Field(
                max_length=MAX_SOURCES,
                description="the ids of the agent's messages (search_conversation_history) and passages this passage "
                "was drawn from, if any",
            ),
        ] = None,
    ) -> PassageRead:
        """Store a passage in an agent's archival memory: long-term storage without a size limit that the agent
        searches when it needs to (it is not in every conversation, unlike core memory). One self-contained fact or
        note per passage (say "Aiko's daughter Mei was born in 2019") is found best later. A passage that differs
        from a stored one only in punctuation, spacing or case is not stored twice: the stored one comes back with
        `duplicate: true`. A fact drawn from what was said can name its sources: each must be this agent's message or
        passage."""
        caller = self.caller_of(ctx)
        async with _agent_scope(caller, agent_id, reads_only=True):  # the agent, checked; no transaction while embedding
            vectors = await caller.runtime.embedder.embed_passages([content])
        async with _agent_scope(caller, agent_id) as (session, agent):
            archival = ArchivalMemory(session, caller.runtime.embedder)
            [stored] = await archival.add(
                agent.id, [NewPassage(content=content, tags=tags or [], sources=sources or [])], vectors=vectors
            )
            return PassageRead.of(stored.passage, duplicate=stored.duplicate)

    async def search_archival_memory(
        self,
        agent_id: AgentId,
        query: Query,
        ctx: Context,
        k: K = 10,
        tags: Annotated[list[str] | None, Field(max_length=MAX_TAGS, description="only passages with all these tags")] = None,
    ) -> PassageList:
        """Search an agent's archival memory by meaning and by words at once (vector similarity and full-text
        ranking, fused). Returns up to k passages, best first, each with a relevance score from 0 to 1. Phrase the
        query as the fact you are looking for ("where does the user work"); any language works."""
        caller = self.caller_of(ctx)
        async with _agent_scope(caller, agent_id, reads_only=True) as (session, agent):
            search = SearchQuery(query, k=k)
            matches = await ArchivalMemory(session, caller.runtime.embedder).search(agent.id, search, tags=tags)
            return PassageList(passages=[PassageRead.of(p, score=hit.score, similarity=hit.similarity) for p, hit in matches])

    async def search_conversation_history(self, agent_id: AgentId, query: Query, ctx: Context, k: K = 10) -> ConversationHits:
        """Search everything an agent and its users have said to each other (recall memory), including
        conversations long gone from the agent's context window, by meaning and by words. Returns up to k user
        and assistant messages, best first, with when they were said and the turn they belong to."""
        caller = self.caller_of(ctx)
        async with _agent_scope(caller, agent_id, reads_only=True) as (session, agent):
            hits = await RecallMemory(session, caller.runtime.embedder).search(agent.id, SearchQuery(query, k=k))
            return ConversationHits(messages=[ConversationHit.of(m, score=h.score) for m, h in hits])

    async def recall_context(
        self,
        agent_id: AgentId,
        query: Query,
        ctx: Context,
        max_chars: Annotated[
            int | None,
            Field(ge=1, le=MAX_BUDGET_CHARS, description="characters of recollected memory at most (default 1,500)"),
        ] = None,
        include_core: Annotated[bool, Field(description="core memory first in `text`")] = True,
        core_blocks: Annotated[
            list[str] | None,
            Field(
                max_length=MAX_BLOCKS,
                description="the core blocks to include, by label (default: all but `persona`, the agent's voice in "
                "Engram's own chat)",
            ),
        ] = None,
        can_search: Annotated[
            bool,
            Field(
                description="true if you can search this memory yourself (search_archival_memory, "
                "search_conversation_history): the heading then says to search for more when these are not enough"
            ),
        ] = False,
        tags: Annotated[
            list[str] | None,
            Field(max_length=MAX_TAGS, description="only archival passages carrying all these tags (no messages then)"),
        ] = None,
        as_of: Annotated[
            str | None,
            Field(
                description="ISO 8601: memory as it stood then (passages valid then, messages said by then); relative "
                "times in the query (yesterday, two weeks ago) are read from it"
            ),
        ] = None,
    ) -> RecollectionRead:
        """What an agent remembers that bears on a message, ready to put in front of a model before it answers: core
        memory, then the archival passages and earlier conversation lines that apply (the best that fit), under the day
        they are dated in the order they were said, within `max_chars` characters (`text`; the same memories as a list
        in `memories`). Empty when memory holds nothing about the message. Use it before answering a user with your
        own model; `query` is the user's message. Without the agent's persona unless `core_blocks` names it."""
        caller = self.caller_of(ctx)
        try:
            given = {
                "query": query,
                "max_chars": max_chars,
                "include_core": include_core,
                "core_blocks": core_blocks,
                "can_search": can_search,
                "tags": tags,
                "as_of": as_of,
            }
            request = RecollectionRequest.model_validate(given)
        except ValidationError as exc:
            raise ToolError(f"invalid_request: {exc.errors()[0]['msg']}") from exc
        async with _agent_scope(caller, agent_id, reads_only=True) as (session, agent):
            recollector = Recollector(session, caller.runtime.embedder, elsewhere=caller.runtime.sessions, caller="mcp")
            return await recollected(recollector, agent.id, request, budget=caller.runtime.settings.recollection_chars)

    async def chat_with_agent(
        self,
        agent_id: AgentId,
        message: Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="what the user says")],
        ctx: Context,
    ) -> ChatReply:
        """Send a message to an agent as its user and get its reply. This runs one full turn of the agent: it may
        search and update its own memory before it answers, and it remembers the exchange. Returns what it said,
        the turn's id and why the turn stopped. A turn calls the agent's language model and can take a while; an
        agent runs one turn at a time, so a busy agent answers with a conflict (retry shortly)."""
        caller = self.caller_of(ctx)
        async with _agent_scope(caller, agent_id):
            pass  # a short transaction of its own: none stays open while the turn runs (as POST …/chat)
        try:
            meter = quota_meter(caller.runtime, caller.principal)
            events = [event async for event in caller.runtime.turn_streams.follow(agent_id, message, None, meter)]
        except EngramError as exc:  # refused: another turn running, no LLM configured, a quota used up…
            raise _tool_error(exc) from exc
        turn_id = events[0].turn_id
        assert turn_id is not None
        turn = ChatResponse.of(turn_id, events)
        if (failure := turn.llm_failure) is not None:
            raise ToolError(f"llm_error: {failure} (the message is saved with turn {turn_id})")
        return ChatReply(reply=turn.reply, turn_id=turn_id, stop_reason=turn.stop_reason)

    async def core_memory_block(self, agent_id: str, label: str, ctx: Context) -> str:
        try:
            agent_uuid = uuid.UUID(agent_id)
        except ValueError:
            raise ResourceNotFoundError(f"no agent {agent_id}") from None
        async with _agent_scope(self.caller_of(ctx), agent_uuid, _resource_error, reads_only=True) as (session, agent):
            return (await CoreMemory(session).get(agent.id, label)).value
