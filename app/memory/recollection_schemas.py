"""The recollection API's bodies: `POST /v1/agents/{agent_id}/recollection`."""

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from app.memory.recollection import Recalled
from app.memory.recollection_gate import KINDS, MAX_BUDGET_CHARS, Kind, Recollection, query_of
from app.memory.schemas import MAX_QUERY_CHARS, MAX_TAGS, Instant, Tag
from app.request_body import RequestBody

MAX_MESSAGES = 50
MAX_MESSAGE_CHARS = 32_000


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
    include_core: bool = Field(default=True, description="core memory first in `text`")
    as_of: Instant | None = Field(
        default=None,
        description="memory as it stood then: passages valid then (superseded since included), messages said by "
        "then, core blocks at their revision of then; times the message names relative to now (yesterday, two weeks ago) "
        "are read from it",
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

    @classmethod
    def of(cls, r: Recollection) -> "RecollectedMemory":
        return cls(kind=r.kind, id=r.id, content=r.shown, occurred_at=r.occurred_at, score=r.score, speaker=r.speaker)


class RecollectionRead(BaseModel):
    text: str = Field(
        description="a prompt-ready block: core memory (with include_core), then the recollected memories, in the words "
        "of the chat path's system prompt; empty when there is neither"
    )
    memories: list[RecollectedMemory] = Field(description="the recollected memories, in the order `text` lists them")
    chars: int = Field(description="characters of recollected memory in `text` (at most max_chars)")
    query: str = Field(description="what was searched (built from `messages` when given)")

    @classmethod
    def of(cls, recalled: Recalled, query: str) -> "RecollectionRead":
        return cls(
            text=recalled.text,
            memories=[RecollectedMemory.of(r) for r in recalled.memories],
            chars=recalled.chars,
            query=query,
        )
