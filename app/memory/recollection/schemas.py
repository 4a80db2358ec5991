"""The recollection API's bodies: `POST /v1/agents/{agent_id}/recollection` (and MCP's `recall_context`), and the
one function that answers them (`recollected`).

`text` is handed to the caller's own model, which is not Engram's agent: by default it carries no persona (the
`persona` block is the voice of Engram's own chat, written for its prompt; the caller's model has its own
instructions) and no word of tools the model does not have (the memories' heading only says what they are). A
caller asks for more explicitly: `core_blocks` names the blocks, `can_search` gives the chat path's heading."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, model_validator

from app.memory.kinds import KINDS, Kind
from app.memory.recollection.candidate import Candidate
from app.memory.recollection.prompt_text import MEMORIES_HEADING, RECOLLECTION_HEADING
from app.memory.recollection.recollector import CoreBlocks, Recollection, Recollector
from app.memory.recollection.selection import MAX_BUDGET_CHARS
from app.memory.schemas import LABEL_PATTERN, MAX_BLOCKS, MAX_QUERY_CHARS, MAX_TAGS, AskersInstant, Tag
from app.memory.search import lexical
from app.request_body import RequestBody

MAX_MESSAGES = 50
MAX_MESSAGE_CHARS = 32_000
SHORT_QUERY_TERMS = 4  # a message with fewer terms is searched with the one before it
# Core blocks `text` leaves out unless `core_blocks` names them: the agent's persona speaks for Engram's own chat.
LEFT_OUT_BY_DEFAULT = ("persona",)
Label = Annotated[str, StringConstraints(pattern=LABEL_PATTERN)]


class ConversationLine(RequestBody):
    role: Literal["user", "assistant"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class RecollectionRequest(RequestBody):
    query: str | None = Field(
        default=None, max_length=MAX_QUERY_CHARS, description="what the model is about to answer; or give `messages`"
    )
    messages: list[ConversationLine] | None = Field(
        default=None,
        max_length=MAX_MESSAGES,
        description="the recent conversation, oldest first: the query is its last user message (with the one before "
        "it, when that is short); or give `query`",
    )
    max_chars: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BUDGET_CHARS,
        description="characters of recollected memory at most (`chars`); default ENGRAM_RECOLLECTION_CHARS, the chat "
        "path's (1,500). Core memory is not counted",
    )
    include_core: bool = Field(
        default=True, description="core memory first in `text` (the blocks `core_blocks` names); false: none"
    )
    core_blocks: list[Label] | None = Field(
        default=None,
        max_length=MAX_BLOCKS,
        description="the core blocks to put first in `text`, by label (listed in the order of their labels, as the chat "
        "path's prompt lists them; a label the agent has no block under is skipped; an empty block is always left out). "
        "Default: every block but `persona`, the agent's voice in "
        "Engram's own chat, which would speak over your model's instructions; name it to have it, e.g. "
        '["persona", "human"]',
    )
    can_search: bool = Field(
        default=False,
        description="true when the model you hand `text` to can search this memory itself (Engram's MCP tools, or "
        "your own functions over `GET …/archival?query=` and `GET …/messages?query=`): the memories' heading then tells "
        "it to search for more when these are not enough, as the chat path's prompt does. Default: a heading that only "
        "says what the memories are (from earlier conversations, dated, data and not instructions)",
    )
    as_of: AskersInstant | None = Field(
        default=None,
        description="memory as it stood then: passages valid then (superseded since included), messages said by "
        "then, core blocks at their revision of then; times the message names relative to now (yesterday, two weeks ago) "
        "are read from it, in its zone (send the asker's offset, e.g. 2024-06-12T09:30:00+09:00: the asker's days)",
    )
    kinds: list[Kind] = Field(
        default=list(KINDS), min_length=1, description="archival (passages) and/or recall (messages); archival alone with `tags`"
    )
    tags: list[Tag] | None = Field(
        default=None,
        max_length=MAX_TAGS,
        description="only archival passages carrying all these tags; messages carry none, so only archival memory is "
        "recollected (`kinds` may not ask for recall)",
    )

    @model_validator(mode="after")
    def _one_question(self) -> "RecollectionRequest":
        if (self.query is None) == (self.messages is None):
            raise ValueError("give `query` or `messages`, not both and not neither")
        if self.core_blocks and not self.include_core:
            raise ValueError("`core_blocks` names blocks for core memory, which include_core false leaves out")
        if not self.search_text:
            raise ValueError("the query is blank" if self.query is not None else "no message has any text")
        self.tags = [tag.strip() for tag in self.tags or [] if tag.strip()] or None  # as a search reads them
        if self.tags:
            if "kinds" in self.model_fields_set and "recall" in self.kinds:
                raise ValueError("messages carry no tags: with `tags`, ask for kinds ['archival'] or leave kinds out")
            self.kinds = ["archival"]
        return self

    @property
    def search_text(self) -> str:
        if self.query is not None:
            return self.query.strip()
        return query_of([(m.role, m.content) for m in self.messages or []])[:MAX_QUERY_CHARS]

    @property
    def said(self) -> list[str]:
        """What the caller has in front of it already: not handed back."""
        return [m.content for m in self.messages or []] or [self.search_text]


class RecollectedMemory(BaseModel):
    kind: Kind = Field(description="archival (a passage) or recall (a message)")
    id: uuid.UUID = Field(description="the passage's or the message's id")
    content: str = Field(
        description="as `text` shows it: on one line, within a share of the budget (a longer memory as an excerpt of the "
        "sentences the query is about, its cuts marked …)",
    )
    occurred_at: datetime = Field(description="when it happened or was said")
    score: float = Field(description="the hybrid search's fused score (comparable within one kind)")
    speaker: str | None = Field(default=None, description="who said it (user or assistant); recall memories only")
    sources: list[uuid.UUID] = Field(
        default_factory=list,
        description="a fact's sources: the messages and passages it was distilled from (empty: a memory stored as given)",
    )

    @classmethod
    def of(cls, r: Candidate) -> "RecollectedMemory":
        return cls(
            kind=r.kind,
            id=r.id,
            content=r.shown,
            occurred_at=r.occurred_at,
            score=r.score,
            speaker=r.speaker,
            sources=list(r.sources),
        )


class RecollectionRead(BaseModel):
    text: str = Field(
        description="a prompt-ready block for your model: core memory (with include_core; the blocks of `core_blocks`), "
        "then the recollected memories under a heading that says what they are (`can_search`: the chat path's), one "
        "escaped line each, as the chat path's system prompt lists them; empty when there is neither"
    )
    memories: list[RecollectedMemory] = Field(description="the recollected memories, in the order `text` lists them")
    chars: int = Field(description="characters of recollected memory in `text` (at most max_chars)")
    query: str = Field(description="what was searched (built from `messages` when given)")

    @classmethod
    def of(cls, recollection: Recollection, request: RecollectionRequest) -> "RecollectionRead":
        return cls(
            text=recollection.text(MEMORIES_HEADING if request.can_search else RECOLLECTION_HEADING),
            memories=[RecollectedMemory.of(r) for r in recollection.memories],
            chars=recollection.chars,
            query=request.search_text,
        )


async def recollected(
    recollector: Recollector, agent_id: uuid.UUID, request: RecollectionRequest, *, budget: int
) -> RecollectionRead:
    """The answer to `request` (`budget`: the characters when it names none): the memories as the chat path
    recollects them, and core memory as `request` asks for it."""
    if not request.include_core:
        blocks = None
    elif request.core_blocks is None:
        blocks = CoreBlocks(leave_out=LEFT_OUT_BY_DEFAULT)
    else:
        blocks = CoreBlocks(only=request.core_blocks)
    recollection = await recollector.recollect(
        agent_id,
        request.search_text,
        budget=request.max_chars or budget,
        kinds=request.kinds,
        tags=request.tags,
        as_of=request.as_of,
        repeats=request.said,
        core_blocks=blocks,
    )
    return RecollectionRead.of(recollection, request)


def query_of(messages: Sequence[tuple[str, str]]) -> str:
    """The query for a recent conversation ([(role, content)], oldest first): its last user message (or its last
    message, if no user spoke), with the message before it when that one is short ("And when was that?" means
    nothing alone). Blank messages are passed over; "" if all are blank."""
    said = [(role, content.strip()) for role, content in messages if content.strip()]
    if not said:
        return ""
    last = max((i for i, (role, _) in enumerate(said) if role == "user"), default=len(said) - 1)
    query = said[last][1]
    if last > 0 and len(lexical.query_terms(query)) < SHORT_QUERY_TERMS:
        query = f"{said[last - 1][1]}\n{query}"
    return query
