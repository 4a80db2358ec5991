"""The agent's tools: OpenAI function schemas, argument validation and execution against memory."""

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.exc import DBAPIError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import rejected_as_data
from app.errors import EngramError, PreconditionFailed, format_validation
from app.llm.embeddings import Embedder
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.archival.timeline import related, supersede
from app.memory.core.service import CoreMemory
from app.memory.kinds import ARCHIVAL, RECALL
from app.memory.recall.service import RecallMemory
from app.memory.schemas import MAX_PASSAGE_CHARS, MAX_TAGS, Instant, NonBlank
from app.memory.search.query import SearchQuery
from app.metrics import TOOL_CALLS

PAGE_SIZE = 5


class ToolError(Exception):
    """A failed call; its message is shown to the model, which may try again."""


@dataclass
class ToolContext:
    session: AsyncSession
    embedder: Embedder
    agent_id: uuid.UUID
    turn_id: uuid.UUID
    context_start_seq: int  # messages from here on are already in the prompt; recall search skips them
    # Set (label → version) when the caller edits blocks as it read them (a memory pass): a block changed meanwhile
    # is not overwritten, the call fails with its current text, as the API's If-Match does.
    block_versions: dict[str, int] | None = None
    # A memory pass: its transcript's references (m1, m2 …) to the messages they name, which a fact may cite.
    references: Mapping[str, uuid.UUID] | None = None


class SendMessage(BaseModel):
    text: str = Field(min_length=1, description="The message to show the user, in the user's language.")


class CoreMemoryUpdate(BaseModel):
    label: str = Field(description="Block to rewrite, e.g. 'human' or 'persona'.")
    content: str = Field(description="The block's complete new text (replaces all of it).")


class CoreMemoryAppend(BaseModel):
    label: str = Field(description="Block to add to.")
    content: str = Field(min_length=1, description="Text to append on a new line.")


class CoreMemoryReplace(BaseModel):
    label: str = Field(description="Block to edit.")
    old: str = Field(min_length=1, description="Exact text currently in the block.")
    new: str = Field(description="Replacement text (empty to delete).")


class ArchivalMemoryCreate(BaseModel):
    content: NonBlank = Field(
        min_length=1, max_length=MAX_PASSAGE_CHARS, description="A self-contained fact or note to remember."
    )
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS, description="Optional short topic tags.")
    occurred_at: Instant | None = Field(
        default=None, description="When it happened or was said, ISO 8601 (e.g. 2024-05-01), if not now."
    )


class ArchivalMemorySupersede(BaseModel):
    passage_id: uuid.UUID = Field(description="The id of the archival memory that is no longer true (from a search or save).")
    content: NonBlank = Field(min_length=1, max_length=MAX_PASSAGE_CHARS, description="The fact as it is now, self-contained.")


class ArchivalMemorySearch(BaseModel):
    query: str = Field(
        min_length=1,
        description='What to look for, in words likely to appear in the memory. A date ("on 3 May, 2023", '
        '"in May 2023") or a person\'s name in it ("the user" included) favours memories from then or said by them.',
    )
    k: int = Field(default=PAGE_SIZE, ge=1, le=20, description="How many results.")
    tags: list[str] | None = Field(default=None, description="Only passages with all these tags.")
    page: int = Field(default=0, ge=0, le=20, description="Result page, from 0.")


class ConversationSearch(BaseModel):
    query: str = Field(
        min_length=1,
        description='What was said, in words likely to appear in it. A date ("on 3 May, 2023") in it favours '
        'messages from then; "the user" or "you" in it, the user\'s messages; "I", yours.',
    )
    page: int = Field(default=0, ge=0, le=20, description="Result page, from 0.")


async def send_message(ctx: ToolContext, args: SendMessage) -> str:
    return "Sent message successfully."


async def core_memory_update(ctx: ToolContext, args: CoreMemoryUpdate) -> str:
    return await _write_block(ctx, args.label, lambda _: args.content)


async def core_memory_append(ctx: ToolContext, args: CoreMemoryAppend) -> str:
    return await _write_block(ctx, args.label, lambda old: f"{old}\n{args.content}" if old else args.content)


async def core_memory_replace(ctx: ToolContext, args: CoreMemoryReplace) -> str:
    def edit(old: str) -> str:
        if args.old not in old:
            raise ToolError(f"'{args.old}' does not appear in block '{args.label}'; copy the exact text from core memory")
        return old.replace(args.old, args.new)

    return await _write_block(ctx, args.label, edit)


async def _write_block(ctx: ToolContext, label: str, edit: Callable[[str], str]) -> str:
    core = CoreMemory(ctx.session)
    seen = ctx.block_versions
    try:
        block = await core.write(
            ctx.agent_id, label, edit, source="agent", turn_id=ctx.turn_id, expected_version=seen.get(label) if seen else None
        )
    except PreconditionFailed:
        assert seen is not None
        current = await core.get(ctx.agent_id, label)
        seen[label] = current.version
        raise ToolError(
            f"block '{label}' was edited since you read it; nothing was written. It now reads:\n{current.value}\n"
            "Write your version again from this text."
        ) from None
    if seen is not None:
        seen[label] = block.version
    return f"Block '{label}' updated ({len(block.value)}/{block.char_limit} characters). It now reads:\n{block.value}"


async def archival_memory_create(ctx: ToolContext, args: ArchivalMemoryCreate) -> str:
    return await store_fact(ctx, NewPassage(content=args.content, tags=args.tags, occurred_at=args.occurred_at))


async def store_fact(ctx: ToolContext, new: NewPassage, note: str = "") -> str:
    """Store a fact; the model is told it was saved (then `note`) or was there already, and which current memories
    may be about the same thing."""
    archival = ArchivalMemory(ctx.session, ctx.embedder)
    [stored] = await archival.add(ctx.agent_id, [new])
    if stored.duplicate:
        cited = ""
        if new.sources:
            added = set(new.sources) <= set(stored.passage.sources)
            cited = (
                " (the lines you cited are now among its sources)"
                if added
                else " (it keeps what it was stored from; the lines you cited are not added)"
            )
        return f"Already in archival memory{cited}, not stored again: {stored.passage.content}{note}"
    saved = f"Saved to archival memory (id {stored.passage.id}).{note}"
    others = await related(archival, ctx.agent_id, stored.passage)
    if not others:
        return saved
    return (
        f"{saved} Current memories possibly about the same thing:\n"
        + "\n".join(ARCHIVAL.quoted(p) for p in others)
        + "\nIf the new fact replaces one of them (a move, a changed plan or preference), call archival_memory_supersede "
        "with that memory's id and the same new text (the passage just saved becomes its successor): the old one is "
        "kept as history, no longer current."
    )


async def archival_memory_supersede(ctx: ToolContext, args: ArchivalMemorySupersede) -> str:
    return await supersede_fact(ctx, args.passage_id, args.content)


async def supersede_fact(
    ctx: ToolContext, passage_id: uuid.UUID, content: str, sources: Sequence[uuid.UUID] = (), note: str = ""
) -> str:
    """Supersede a fact; the model is told by which passage (then `note`)."""
    archival = ArchivalMemory(ctx.session, ctx.embedder)
    stored = await supersede(archival, ctx.agent_id, passage_id, content, sources=sources)
    return (
        f"Archival memory {passage_id} is superseded (history from now on) by {stored.passage.id}: {stored.passage.content}{note}"
    )


async def archival_memory_search(ctx: ToolContext, args: ArchivalMemorySearch) -> str:
    query = SearchQuery(args.query, k=args.k * (args.page + 1), asker="assistant")
    matches = await ArchivalMemory(ctx.session, ctx.embedder).search(ctx.agent_id, query, tags=args.tags)
    page = matches[args.page * args.k :]
    if not page:
        return "No archival memories match." if args.page == 0 else "No more results."
    lines = [f"{ARCHIVAL.quoted(p)} (score {hit.score:.2f})" for p, hit in page]
    return f"{len(page)} current archival memories, dated when they happened (page {args.page}):\n" + "\n".join(lines)


async def conversation_search(ctx: ToolContext, args: ConversationSearch) -> str:
    query = SearchQuery(args.query, k=PAGE_SIZE * (args.page + 1), asker="assistant")
    hits = await RecallMemory(ctx.session, ctx.embedder).search(ctx.agent_id, query, below_seq=ctx.context_start_seq)
    page = hits[args.page * PAGE_SIZE :]
    if not page:
        return "No earlier messages match." if args.page == 0 else "No more results."
    lines = [RECALL.quoted(m) for m, _ in page]
    return f"{len(page)} earlier messages (page {args.page}):\n" + "\n".join(lines)


@dataclass(frozen=True)
class Embeds:
    """The texts a call embeds, as passages and as queries, and whether it reads the baseline's cohorts: the step
    embeds them before its transaction opens."""

    passages: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    cohorts: bool = False


@dataclass
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    run: Callable[[ToolContext, Any], Awaitable[str]]
    embeds: Callable[[Any], Embeds] = lambda _: Embeds()

    def schema(self) -> dict[str, Any]:
        params = self.args.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": params}}


REPLY_TOOL = "send_message"  # the one way the user hears the agent
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool(
            REPLY_TOOL,
            "Send a message to the user. The only way the user sees anything you say; ends your turn.",
            SendMessage,
            send_message,
        ),
        Tool(
            "core_memory_update",
            "Rewrite a core memory block completely. Use it to correct facts (e.g. a new name) or to condense a full block.",
            CoreMemoryUpdate,
            core_memory_update,
        ),
        Tool("core_memory_append", "Append a line to a core memory block.", CoreMemoryAppend, core_memory_append),
        Tool("core_memory_replace", "Replace exact text inside a core memory block.", CoreMemoryReplace, core_memory_replace),
        Tool(
            "archival_memory_create",
            "Save a fact, preference, event or detail to unlimited long-term archival memory.",
            ArchivalMemoryCreate,
            archival_memory_create,
            lambda args: Embeds(passages=(args.content,), queries=(args.content,), cohorts=True),  # and `related`'s
        ),
        Tool(
            "archival_memory_supersede",
            "Replace an archival memory that is no longer true (the user moved, a plan or preference changed) with the "
            "current fact. The old one is kept as history, no longer current.",
            ArchivalMemorySupersede,
            archival_memory_supersede,
            lambda args: Embeds(passages=(args.content,)),
        ),
        Tool(
            "archival_memory_search",
            "Search archival memory (meaning and keywords). Use it before answering about anything the user told you before.",
            ArchivalMemorySearch,
            archival_memory_search,
            lambda args: Embeds(queries=(args.query,)),
        ),
        Tool(
            "conversation_search",
            "Search earlier conversation messages that are no longer in your context.",
            ConversationSearch,
            conversation_search,
            lambda args: Embeds(queries=(args.query,)),
        ),
    ]
}


class Toolset:
    """The tools one kind of turn may call, as the LLM is offered them."""

    def __init__(self, tools: Sequence[Tool]):
        self.tools = {t.name: t for t in tools}
        self.schemas = [t.schema() for t in self.tools.values()]
        self.params = {name: list(t.args.model_fields) for name, t in self.tools.items()}


CHAT_TOOLS = Toolset(list(TOOLS.values()))


@dataclass
class ToolOutcome:
    ok: bool
    result: str
    arguments: dict[str, Any]


async def execute(ctx: ToolContext, name: str, arguments: dict[str, Any], toolset: Toolset = CHAT_TOOLS) -> ToolOutcome:
    """Run one call; every failure becomes an error result for the model, never an exception."""
    outcome = await _execute(ctx, name, arguments, toolset)
    TOOL_CALLS.labels(name if name in TOOLS else "unknown", str(outcome.ok).lower()).inc()
    return outcome


async def _execute(ctx: ToolContext, name: str, arguments: dict[str, Any], toolset: Toolset) -> ToolOutcome:
    tool = toolset.tools.get(name)
    if tool is None:
        return ToolOutcome(False, f"Error: unknown tool '{name}'. Available tools: {', '.join(toolset.tools)}.", arguments)
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as exc:
        return ToolOutcome(False, f"Error: invalid arguments for {name}: {format_validation(exc.errors())}.", arguments)
    try:
        async with ctx.session.begin_nested():
            return ToolOutcome(True, await tool.run(ctx, args), arguments)
    except (ToolError, EngramError) as exc:
        return ToolOutcome(False, f"Error: {exc}", arguments)
    except DBAPIError as exc:
        if not rejected_as_data(exc):
            raise
        return ToolOutcome(False, f"Error: the arguments cannot be stored ({exc.orig}); remove control characters", arguments)
