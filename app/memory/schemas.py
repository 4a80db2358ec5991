import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, Field, model_validator

from app.memory.search.named_sql import DATE_SHARE, SPEAKER_SHARE
from app.read_model import ReadModel
from app.request_body import RequestBody

LABEL_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
DEFAULT_BLOCK_LIMIT = 2000
MAX_BLOCK_LIMIT = 100_000
MAX_BLOCKS = 32
MAX_PASSAGE_CHARS = 20_000
MAX_TAGS = 16
MAX_QUERY_CHARS = 2000  # of a search query
MAX_SOURCES = 16  # a passage's sources: the messages and passages it was distilled from
SOURCES = (
    f"provenance: the ids of this agent's messages and passages this passage was distilled from (at most {MAX_SOURCES}); "
    "erasing them all erases it. An id that is not this agent's message or passage is a 422"
)
MAX_KEY_CHARS = 200
# What a path segment holds as it is (RFC 3986's unreserved characters, and `:` and `@`), not starting with a dot:
# `.` and `..` are no names but path steps, which clients and proxies resolve away.
KEY_PATTERN = r"^[A-Za-z0-9_~:@-][A-Za-z0-9._~:@-]*$"
KEY = (
    f"your name for the passage, unique among the agent's current passages: 1 to {MAX_KEY_CHARS} letters, digits and "
    "`-._~:@` (as a URL path holds them), not starting with a dot; `PUT …/archival/keys/{key}` stores or supersedes "
    "the passage under it, and its superseded versions keep it"
)
PassageKey = Annotated[str, Field(min_length=1, max_length=MAX_KEY_CHARS, pattern=KEY_PATTERN, description=KEY)]


def _utc(moment: datetime) -> datetime:
    """A time without a zone is taken as UTC (not as the server's local time); one PostgreSQL cannot hold, refused."""
    try:
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except OverflowError:
        raise ValueError("the time is out of range") from None


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank (it holds only whitespace)")
    return text


# Text that is stored and searched: whitespace alone is refused, never stored as an empty memory.
NonBlank = Annotated[str, AfterValidator(_not_blank)]


def _zoned(moment: datetime) -> datetime:
    """As `_utc`, but a time given with its zone keeps it: the asker's calendar ("yesterday" in Tokyo)."""
    return _utc(moment).astimezone(moment.tzinfo) if moment.tzinfo else _utc(moment)


# An ISO 8601 date or time ("2024-05-01", "2024-05-01T09:30:00+09:00"); without a zone, UTC.
Instant = Annotated[datetime, AfterValidator(_utc)]
# The same, kept in the zone it was given in: the asker's now, whose days are the asker's.
AskersInstant = Annotated[datetime, AfterValidator(_zoned)]
OCCURRED_AT = "when it happened or was said (ISO 8601; without a zone, UTC); default: now"


class BlockCreate(RequestBody):
    label: str = Field(pattern=LABEL_PATTERN, description="lower-case identifier, e.g. `human`, `persona`")
    value: str = ""
    limit: int = Field(default=DEFAULT_BLOCK_LIMIT, ge=1, le=MAX_BLOCK_LIMIT, description="maximum characters")
    description: str | None = Field(default=None, max_length=1000)
    read_only: bool = False


class BlockWrite(RequestBody):
    value: str | None = Field(default=None, description="the new value; or give restore_version instead")
    restore_version: int | None = Field(default=None, ge=1, description="restore the value of this earlier version")
    limit: int | None = Field(default=None, ge=1, le=MAX_BLOCK_LIMIT)
    description: str | None = Field(default=None, max_length=1000)
    read_only: bool | None = None

    @model_validator(mode="after")
    def _value_or_restore(self) -> "BlockWrite":
        if (self.value is None) == (self.restore_version is None):
            raise ValueError("give exactly one of value and restore_version")
        return self


class BlockRead(ReadModel):
    label: str
    value: str
    limit: int = Field(validation_alias=AliasChoices("limit", "char_limit"))
    description: str | None
    read_only: bool
    version: int
    updated_at: datetime


class CoreMemoryRead(BaseModel):
    blocks: list[BlockRead]


class RevisionRead(ReadModel):
    version: int
    value: str
    source: Literal["agent", "api"]
    turn_id: uuid.UUID | None
    created_at: datetime


Tag = str


class PassageWrite(RequestBody):
    """A passage as given: the body of `PUT …/archival/keys/{key}` (the key is the path's) and a line of an import job."""

    content: NonBlank = Field(min_length=1, max_length=MAX_PASSAGE_CHARS)
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    occurred_at: Instant | None = Field(default=None, description=OCCURRED_AT)
    sources: list[uuid.UUID] = Field(default_factory=list, max_length=MAX_SOURCES, description=SOURCES)


class PassageCreate(PassageWrite):
    key: PassageKey | None = Field(
        default=None, description=f"{KEY}. A key a current passage holds already is a 409 naming that passage"
    )


class PassageSupersede(RequestBody):
    content: NonBlank = Field(min_length=1, max_length=MAX_PASSAGE_CHARS, description="the fact as it is now")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS, description="default: the superseded passage's tags")
    occurred_at: Instant | None = Field(default=None, description=f"{OCCURRED_AT}. The superseded passage is valid until then")
    sources: list[uuid.UUID] = Field(
        default_factory=list, max_length=MAX_SOURCES, description=f"{SOURCES}. The superseded passage keeps its own"
    )


MAX_BATCH_ITEMS = 500  # POST …/archival/batch; more (or more than Settings.max_batch_chars) goes to an import job


class PassageBatchCreate(RequestBody):
    items: list[PassageCreate] = Field(
        min_length=1,
        description=f"up to {MAX_BATCH_ITEMS} passages and ENGRAM_MAX_BATCH_CHARS characters in all (413 beyond: use "
        "POST …/archival/import)",
    )


class PassageRead(ReadModel):
    id: uuid.UUID
    content: str
    tags: list[str]
    created_at: datetime = Field(description="when it was stored")
    occurred_at: datetime = Field(description="when it happened or was said")
    valid_until: datetime | None = Field(description="superseded passages: when the passage replacing it took effect")
    superseded_by: uuid.UUID | None = Field(description="superseded passages: the passage replacing it; null: current")
    sources: list[uuid.UUID] = Field(
        default_factory=list, description="the messages and passages it was distilled from (empty: stored as given)"
    )
    key: str | None = Field(
        default=None, description="the caller's name for it (PUT …/archival/keys/{key}); a superseded passage keeps its key"
    )
    score: float | None = Field(
        default=None,
        description="searches only: the rank score, 0..1: the cosine to the query less part of its vector candidates' "
        "mean, min-max normalised, and normalised BM25 over the candidates, combined, and a reply to a question "
        "raised by part of the question's score; plus "
        f"{DATE_SHARE} for a passage from a date the query names and {SPEAKER_SHARE} for one said by a speaker it names "
        "(app/memory/search/hybrid.py)",
    )
    similarity: float | None = Field(default=None, description="searches only: cosine similarity of query and passage")
    duplicate: bool | None = Field(
        default=None,
        description="inserts only: true when a near-duplicate was already stored (under a key: the key's passage "
        "already said this, and no new version was stored)",
    )


class PassageBatchRead(BaseModel):
    items: list[PassageRead]


MAX_HANDED_IN = 500  # messages per request; a longer conversation is handed in over several (each retry-safe with ids)


class HandedInMessage(RequestBody):
    role: Literal["user", "assistant"]
    content: NonBlank = Field(min_length=1, max_length=32_000)
    occurred_at: Instant | None = Field(default=None, description=f"{OCCURRED_AT}")
    id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="your id of the message: a message already handed in with this id is not stored again (safe "
        "retries); another message (role, content or occurred_at) with it is a 409",
    )


class HandInRequest(RequestBody):
    messages: list[HandedInMessage] = Field(min_length=1, max_length=MAX_HANDED_IN)
    memory_pass: bool = Field(default=False, description="queue a sleep-time memory pass over them (and anything before)")

    @model_validator(mode="after")
    def _ids_unique(self) -> "HandInRequest":
        counted = Counter(m.id for m in self.messages if m.id is not None)
        if twice := sorted(i for i, n in counted.items() if n > 1):
            raise ValueError(f"message ids appear more than once: {', '.join(twice[:5])}")
        return self


class HandInRead(BaseModel):
    message_ids: list[uuid.UUID] = Field(
        description="Engram's id of each message, in the order given (an earlier one's for a repeat)"
    )
    stored: int = Field(description="messages stored now")
    already_stored: int = Field(description="messages whose id had been handed in before: not stored again")
    memory_pass_id: uuid.UUID | None = Field(description="the memory pass queued (a turn: GET …/turns/{id}); null: none")


class MessageRead(ReadModel):
    id: uuid.UUID
    role: Literal["user", "assistant", "tool", "system"]
    content: str
    turn_id: uuid.UUID | None
    created_at: datetime = Field(description="when it was stored")
    occurred_at: datetime = Field(description="when it was said (an imported message: as the import gave it)")
    handed_in: bool = Field(default=False, description="handed in (POST …/messages), not said in one of the agent's turns")
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    score: float | None = Field(default=None, description="searches only")


class ErasureRead(BaseModel):  # what an erasure took along (app/memory/archival/erasure.py)
    id: uuid.UUID = Field(description="what was erased")
    erased_passages: list[uuid.UUID] = Field(
        description="passages drawn from it alone (their sources all erased), or from one of those, down the chain: "
        "erased with it"
    )
    sources_trimmed: int = Field(
        description="passages drawn from it and from something that stays: kept, without it among their sources"
    )


class PassageErasureRead(ErasureRead):  # DELETE …/archival/{id}, …/archival/keys/{key}
    pass


class MessageErasureRead(ErasureRead):  # DELETE …/messages/{id}
    erased_messages: list[uuid.UUID] = Field(
        description="every message erased: this one and, for an assistant's, the results of its tool calls (a call's "
        "result cannot stay without it); passages drawn from any of them count in `erased_passages`"
    )
    summary_withdrawn: bool = Field(
        description="the message had left the context for the running summary, which may quote it: the summary is "
        "replaced by a pointer to recall memory (GET …/context shows it)"
    )


class ImportJobRead(ReadModel):
    id: uuid.UUID
    agent_id: uuid.UUID
    status: Literal["queued", "running", "done", "cancelled", "failed"] = Field(
        description="queued, running (also while it waits to resume after a restart or to retry after a failure), done, "
        "cancelled, or failed (the embedder refused an item, or the same slice failed again and again; see `error`)"
    )
    total: int = Field(description="items in the import")
    done: int = Field(description="items done so far: stored (near-duplicates of stored passages included) or skipped")
    duplicates: int = Field(description="of them, near-duplicates of a stored passage: kept once, not stored again")
    skipped: int = Field(
        description="of them, not stored: every source they were drawn from was erased after the job was submitted "
        "(erasing it would have erased them); a source erased among others is dropped, and its item stored"
    )
    rate_per_second: float | None = Field(description="items stored per second by the current run; null before it stores any")
    eta_seconds: float | None = Field(description="seconds left at that rate; null without a rate or once finished")
    error: str | None = Field(description="the last failure, if any: retried with growing waits, until the job fails")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
