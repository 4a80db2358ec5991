"""What you hand Engram: passages, messages, blocks and lines of a conversation (dicts of the same fields do too).
A field left None is not sent: the server's default stands. Dates: ISO 8601, a date alone allowed; a datetime
without a zone is UTC."""

from collections.abc import Iterable
from datetime import date, datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, TypeAdapter

Instant = datetime | date
When = Instant | str  # an ISO 8601 string too, as the API takes it
INSTANT: TypeAdapter[Instant] = TypeAdapter(Instant)


class NewPassage(BaseModel):
    content: str
    tags: list[str] | None = None
    occurred_at: Instant | None = None  # when it happened or was said; default: now
    sources: list[UUID] | None = None  # ids of this agent's messages and passages it was drawn from
    key: str | None = None  # your name for it, unique among the agent's current passages (not on an import's lines)


class NewMessage(BaseModel):
    """A message of a conversation held elsewhere, handed in to recall memory."""

    role: Literal["user", "assistant"]
    content: str
    occurred_at: Instant | None = None
    id: str | None = None  # your id: a message handed in before under it is not stored again (safe retries)


class ConversationLine(BaseModel):
    """A line of the recent conversation, for recollection."""

    role: Literal["user", "assistant"]
    content: str


class NewBlock(BaseModel):
    """A core memory block of a new agent."""

    label: str
    value: str | None = None
    limit: int | None = None  # characters (server default 2,000)
    description: str | None = None
    read_only: bool | None = None


def instant(value: When | None) -> Instant | None:
    """A date or time given as a string read as the API reads it (a date alone, or a datetime; no zone: UTC)."""
    return INSTANT.validate_python(value) if isinstance(value, str) else value


def uuids(ids: Iterable[str | UUID] | None) -> list[UUID] | None:
    return None if ids is None else [UUID(str(i)) for i in ids]
