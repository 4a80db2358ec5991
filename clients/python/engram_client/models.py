"""What Engram answers, as pydantic models with the API's fields (tests/clients/python/test_contract.py holds each to
`openapi.json`). Unknown fields are ignored, so that a newer server's additions never break an older client."""

from datetime import datetime
from typing import Generic, Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing: pass `next_cursor` back as `cursor` for the next (None: the last page)."""

    items: list[T]
    next_cursor: str | None = None


class Block(BaseModel):
    """A core memory block."""

    label: str
    value: str
    limit: int
    description: str | None
    read_only: bool
    version: int  # what `memory.put(..., if_match=)` takes
    updated_at: datetime


class CoreMemory(BaseModel):
    blocks: list[Block]

    def __getitem__(self, label: str) -> Block:
        """The block under `label` (KeyError naming the labels there are)."""
        for block in self.blocks:
            if block.label == label:
                return block
        raise KeyError(f"no block {label!r}; the agent has {', '.join(b.label for b in self.blocks) or 'none'}")


class Revision(BaseModel):
    """One version of a core memory block."""

    version: int
    value: str
    source: Literal["agent", "api"]
    turn_id: UUID | None
    created_at: datetime


class Agent(BaseModel):
    id: UUID
    name: str
    system: str | None
    model: str | None
    created_at: datetime
    updated_at: datetime
    blocks: list[Block]


class Passage(BaseModel):
    """An archival memory passage (a search hit carries `score` and `similarity`)."""

    id: UUID
    content: str
    tags: list[str]
    created_at: datetime  # when Engram stored it
    occurred_at: datetime  # when it happened or was said
    valid_until: datetime | None  # superseded: when its successor took effect
    superseded_by: UUID | None
    sources: list[UUID] = Field(default_factory=list)  # the messages and passages it was drawn from
    key: str | None = None  # your name for it (archival.put_key); a superseded version keeps it
    score: float | None = None
    similarity: float | None = None
    duplicate: bool | None = None  # an insert: a near-duplicate was stored already (this is that passage)


class PassageErasure(BaseModel):
    """What deleting a passage erased: it, and the passages drawn from it alone, down the chain."""

    id: UUID
    erased_passages: list[UUID]
    sources_trimmed: int


class MessageErasure(PassageErasure):
    """What forgetting a message erased: an assistant's with its tool results, and what was drawn from them."""

    erased_messages: list[UUID]
    summary_withdrawn: bool


class Message(BaseModel):
    """A message of recall memory."""

    id: UUID
    role: Literal["user", "assistant", "tool", "system"]
    content: str
    turn_id: UUID | None
    created_at: datetime
    occurred_at: datetime
    handed_in: bool = False
    tool_calls: list[dict[str, object]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    score: float | None = None


class HandIn(BaseModel):
    """Messages handed in: Engram's id of each (an earlier one's for a repeat), and the memory pass queued."""

    message_ids: list[UUID]
    stored: int
    already_stored: int
    memory_pass_id: UUID | None


class RecollectedMemory(BaseModel):
    kind: Literal["archival", "recall"]
    id: UUID
    content: str
    occurred_at: datetime
    score: float
    speaker: str | None = None
    sources: list[UUID] = Field(default_factory=list)


class Recollection(BaseModel):
    """What your model should be handed before it answers: `text` (prompt-ready; "" when memory holds nothing that
    bears on it), the same `memories` one by one, and `chars` of memory in `text`."""

    text: str
    memories: list[RecollectedMemory]
    chars: int
    query: str


class ImportJob(BaseModel):
    """A bulk import of passages, stored in the background."""

    id: UUID
    agent_id: UUID
    status: Literal["queued", "running", "done", "cancelled", "failed"]
    total: int
    done: int
    duplicates: int
    skipped: int  # of `done`, items not stored: every source they cited was erased before they were reached
    rate_per_second: float | None
    eta_seconds: float | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status in ("done", "cancelled", "failed")


class ImportResult(BaseModel):
    """An agent imported from an export (or a Letta agent file)."""

    agent: Agent
    source: Literal["engram", "letta"]
    blocks: int
    revisions: int
    passages: int
    messages: int
    turns: int
    embedded: int
    skipped_tools: list[str] = Field(default_factory=list)
    mapped_tools: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class MemoryPass(BaseModel):
    """A memory pass queued (or the one already running): a turn, `turns.get(agent_id, pass_id)`."""

    pass_id: UUID


class PassageBatchRead(BaseModel):
    items: list[Passage]
