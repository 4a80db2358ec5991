import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field, model_validator

from app.read_model import ReadModel
from app.request_body import RequestBody

LABEL_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
DEFAULT_BLOCK_LIMIT = 2000
MAX_BLOCK_LIMIT = 100_000
MAX_BLOCKS = 32
MAX_PASSAGE_CHARS = 20_000
MAX_TAGS = 16
MAX_QUERY_CHARS = 2000  # of a search query


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


class PassageCreate(RequestBody):
    content: str = Field(min_length=1, max_length=MAX_PASSAGE_CHARS)
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)


class PassageBatchCreate(RequestBody):
    items: list[PassageCreate] = Field(min_length=1, max_length=500)


class PassageRead(ReadModel):
    id: uuid.UUID
    content: str
    tags: list[str]
    created_at: datetime
    score: float | None = Field(
        default=None,
        description="searches only: 0..1, the rank score: min-max normalised cosine and normalised BM25 over the candidates, "
        "combined, and a reply to a question raised by part of the question's score (app/memory/hybrid.py)",
    )
    similarity: float | None = Field(default=None, description="searches only: cosine similarity of query and passage")
    duplicate: bool | None = Field(default=None, description="inserts only: true when a near-duplicate was already stored")


class PassageBatchRead(BaseModel):
    items: list[PassageRead]


class MessageRead(ReadModel):
    id: uuid.UUID
    role: Literal["user", "assistant", "tool", "system"]
    content: str
    turn_id: uuid.UUID | None
    created_at: datetime
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    score: float | None = Field(default=None, description="searches only")
