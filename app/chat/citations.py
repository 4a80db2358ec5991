"""The memory pass cites: each line of its transcript carries a short reference (m1, m2 … numbered within the pass:
a few tokens, where a uuid costs some twenty), and its `archival_memory_create` takes the references of the lines a
fact was drawn from (and so does its `archival_memory_supersede`, for the fact that replaces another). They are mapped
here to the messages' ids, the fact's `sources`; a reference that names no line is dropped, and the model (and the
pass's tool_result event) told so. A chat turn's agent has no references in its context, so its tools take none."""

import re
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, StringConstraints

from app.chat.tools import (
    TOOLS,
    ArchivalMemoryCreate,
    ArchivalMemorySupersede,
    Tool,
    ToolContext,
    Toolset,
    store_fact,
    supersede_fact,
)
from app.memory.archival.service import NewPassage
from app.memory.models import Message
from app.memory.schemas import MAX_SOURCES

Reference = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=40),
    BeforeValidator(lambda given: str(given) if isinstance(given, int) else given),  # 3 for m3
]
Sources = Annotated[
    list[Reference],
    Field(
        max_length=MAX_SOURCES,
        description='The references of the transcript\'s messages the fact comes from, e.g. ["m3", "m7"].',
    ),
]
CITE = " Cite the messages it comes from in `sources`."
NUMBER = re.compile("[0-9]+")  # a line's number alone; not str.isdigit(), which "²" passes and int() refuses


def reference(position: int) -> str:
    """The reference of the transcript's line at `position` (from 1)."""
    return f"m{position}"


def references(said: Sequence[Message]) -> dict[str, uuid.UUID]:
    """The references of a transcript of `said`, in order, to the messages' ids."""
    return {reference(position): message.id for position, message in enumerate(said, 1)}


def resolved(known: Mapping[str, uuid.UUID], cited: Sequence[str]) -> tuple[list[uuid.UUID], list[str]]:
    """The ids of the messages `cited` names (each once, in order) and the references that name none. A reference may
    come as the transcript shows it ("[m3]"), in capitals, or as its number alone."""
    ids: list[uuid.UUID] = []
    unknown: list[str] = []
    for given in dict.fromkeys(cited):
        key = given.strip("[] ").lower()
        key = reference(int(key)) if NUMBER.fullmatch(key) else key
        if key in known:
            ids.append(known[key])
        else:
            unknown.append(given)
    return list(dict.fromkeys(ids)), unknown


class CitedFact(ArchivalMemoryCreate):
    sources: Sources = []


class CitedSuccessor(ArchivalMemorySupersede):
    sources: Sources = []


async def archival_memory_create_cited(ctx: ToolContext, args: CitedFact) -> str:
    ids, unknown = resolved(ctx.references or {}, args.sources)
    new = NewPassage(content=args.content, tags=args.tags, occurred_at=args.occurred_at, sources=ids)
    return await store_fact(ctx, new, ignored(unknown))


async def archival_memory_supersede_cited(ctx: ToolContext, args: CitedSuccessor) -> str:
    ids, unknown = resolved(ctx.references or {}, args.sources)
    return await supersede_fact(ctx, args.passage_id, args.content, ids, ignored(unknown))


def ignored(unknown: Sequence[str]) -> str:
    """What the model is told of the references that name no line ("" when there are none)."""
    if not unknown:
        return ""
    several = len(unknown) > 1
    named = ", ".join(f"'{given}'" for given in unknown)
    return (
        f" Unknown reference{'s' if several else ''} {named} ignored: the fact is stored without {'them' if several else 'it'}. "
        "A reference is the [m…] that begins a line of the transcript."
    )


def citing(name: str, args: type[BaseModel], run: Callable[[ToolContext, Any], Awaitable[str]]) -> Tool:
    """The chat turn's tool `name`, taking `args` (its own and `sources`) and run by `run`, for the memory pass."""
    chat = TOOLS[name]
    return Tool(name, chat.description + CITE, args, run, chat.embeds)


# A memory pass talks to nobody: it keeps memory (a block rewritten whole, facts stored with their sources, stale ones
# superseded).
MEMORY_PASS_TOOLS = Toolset(
    [
        TOOLS["core_memory_update"],
        citing("archival_memory_create", CitedFact, archival_memory_create_cited),
        citing("archival_memory_supersede", CitedSuccessor, archival_memory_supersede_cited),
        TOOLS["archival_memory_search"],
    ]
)
