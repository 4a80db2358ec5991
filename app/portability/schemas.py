"""The export document (`{"format": "engram.agent", "version": 1, ...}`) and what an import answers.

Ids in the document are the exporting database's: an import gives the agent and all its rows new ids (importing a
document twice gives two agents) and rewrites every reference between them (a message's or a revision's turn, a
stored event's agent and turn, a passage's sources and successor). Vectors travel as base64 of little-endian float32 (what pgvector stores, a quarter
of the size of JSON numbers), each with the name of the model that made it."""

import base64
import binascii
import uuid
from collections import Counter
from typing import Annotated, Any, Final, Literal, TypeVar

import numpy as np
from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, model_validator
from sqlmodel import SQLModel

from app.agents.schemas import AgentRead
from app.memory.schemas import LABEL_PATTERN, MAX_BLOCK_LIMIT, MAX_BLOCKS, MAX_SOURCES, Instant, PassageKey
from app.read_model import ReadModel

FORMAT: Final = "engram.agent"
VERSION: Final = 1


def encode_vector(vector: Any) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(encoded: str) -> list[float]:
    vector: list[float] = np.frombuffer(base64.b64decode(encoded), dtype="<f4").astype(float).tolist()
    return vector


def _valid_vector(encoded: str | None) -> str | None:
    if encoded is None:
        return None
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("an embedding is base64 of little-endian float32 values") from None
    if not raw or len(raw) % 4:
        raise ValueError("an embedding is base64 of little-endian float32 values (a multiple of 4 bytes)")
    return encoded


RowT = TypeVar("RowT", bound=SQLModel)

Vector = Annotated[str | None, AfterValidator(_valid_vector)]


class _Strict(ReadModel):
    # A field this version does not know is refused, naming it: a misspelt field must not vanish on import.
    # Exports are made from rows (`Doc.of(row)`), imports from JSON, and rows from imports (`doc.row(Table)`).
    model_config = ConfigDict(extra="forbid")

    def row(self, table: type[RowT], **given: Any) -> RowT:
        """The row of `table` this part of a document becomes: the fields both have by name, then `given` (new ids,
        columns named or made otherwise). The document's own `id` is never kept: an import gives new ids."""
        shared = (type(self).model_fields.keys() & table.model_fields.keys()) - given.keys() - {"id"}
        return table(**{name: getattr(self, name) for name in shared}, **given)


class RevisionDoc(_Strict):
    version: int = Field(ge=1)
    value: str
    source: Literal["agent", "api"]
    turn_id: uuid.UUID | None = None
    created_at: Instant


class BlockDoc(_Strict):
    label: str = Field(pattern=LABEL_PATTERN)
    value: str
    limit: int = Field(ge=1, le=MAX_BLOCK_LIMIT, validation_alias=AliasChoices("limit", "char_limit"))
    description: str | None = None
    read_only: bool = False
    version: int = Field(ge=1)
    updated_at: Instant
    history: list[RevisionDoc] = Field(description="every revision, oldest first; the last one is the block's value")

    @model_validator(mode="after")
    def _consistent(self) -> "BlockDoc":
        if len(self.value) > self.limit:
            raise ValueError(f"block '{self.label}' holds {len(self.value)} characters, over its limit of {self.limit}")
        versions = [r.version for r in self.history]
        if len(set(versions)) != len(versions):
            raise ValueError(f"block '{self.label}' has two revisions with the same version")
        if self.history and max(versions) != self.version:
            raise ValueError(f"block '{self.label}' is at version {self.version}, but its newest revision is {max(versions)}")
        return self


class PassageDoc(_Strict):
    id: uuid.UUID
    content: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    created_at: Instant
    occurred_at: Instant | None = Field(default=None, description="when it happened; default: created_at")
    valid_until: Instant | None = Field(default=None, description="a superseded passage: when its successor took effect")
    superseded_by: uuid.UUID | None = Field(default=None, description="a superseded passage: its successor's id (here)")
    sources: list[uuid.UUID] = Field(
        default_factory=list,
        max_length=MAX_SOURCES,
        description="the ids (here) of the messages and passages it was distilled from; an import gives them new ids",
    )
    key: PassageKey | None = Field(
        default=None, description="the caller's name for it: held by one current passage; superseded ones keep theirs"
    )
    embedding: Vector = None
    embedding_model: str | None = None

    @model_validator(mode="after")
    def _validity(self) -> "PassageDoc":
        if (self.valid_until is None) != (self.superseded_by is None):
            raise ValueError("valid_until and superseded_by go together: a passage is superseded by another from a date")
        if self.superseded_by == self.id:
            raise ValueError("a passage cannot supersede itself")
        return self


class ToolCallDoc(_Strict):
    id: str
    name: str
    arguments: str = Field(description="the call's arguments as the model wrote them (JSON text)")


class MessageDoc(_Strict):
    id: uuid.UUID
    turn_id: uuid.UUID | None = None
    role: Literal["user", "assistant", "tool", "system"]
    content: str = ""
    tool_calls: list[ToolCallDoc] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    created_at: Instant
    occurred_at: Instant | None = Field(default=None, description="when it was said; default: created_at")
    embedding: Vector = None
    embedding_model: str | None = None
    handed_in: bool = Field(default=False, description="handed in (POST …/messages): recall memory only, never in context")
    external_id: str | None = Field(default=None, max_length=200, description="the id it was handed in with")


class TurnDoc(_Strict):
    id: uuid.UUID
    kind: Literal["chat", "memory_pass"] = "chat"
    passed_over: int | None = Field(
        default=None, ge=0, description="a memory pass: how many of the messages (in order) it and those before went over"
    )
    status: str
    stop_reason: str | None = None
    message: str
    reply: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = None
    created_at: Instant
    finished_at: Instant | None = None
    events: list[dict[str, Any]] = Field(default_factory=list, description="the stored events, in order")


class AgentDoc(_Strict):
    id: uuid.UUID
    name: str = Field(min_length=1, max_length=200)
    system: str | None = None
    model: str | None = None
    summary: str | None = Field(default=None, description="the summary standing for messages that left the context")
    context_start: int = Field(
        default=0, ge=0, description="how many of the messages (in order) have left the context; the summary stands for them"
    )
    created_at: Instant
    updated_at: Instant


class AgentDocument(_Strict):
    """One agent with everything it remembers."""

    format: Literal["engram.agent"] = FORMAT
    version: Literal[1] = VERSION
    exported_at: Instant
    embedding_model: str | None = Field(default=None, description="the exporting server's embedder")
    embedding_dim: int | None = None
    agent: AgentDoc
    blocks: list[BlockDoc] = Field(max_length=MAX_BLOCKS)
    passages: list[PassageDoc] = Field(default_factory=list)
    messages: list[MessageDoc] = Field(default_factory=list, description="oldest first")
    turns: list[TurnDoc] = Field(default_factory=list, description="oldest first")

    @model_validator(mode="after")
    def _references(self) -> "AgentDocument":
        labels = [b.label for b in self.blocks]
        if len(set(labels)) != len(labels):
            raise ValueError("block labels must be unique")
        if self.agent.context_start > len(self.messages):
            raise ValueError(f"agent.context_start is {self.agent.context_start}, past the {len(self.messages)} messages")
        _passage_references(self.passages, self.messages)
        turns = {t.id for t in self.turns}
        if len(turns) != len(self.turns):
            raise ValueError("two turns have the same id")
        for where, turn_id in [
            *((f"messages[{i}]", m.turn_id) for i, m in enumerate(self.messages)),
            *((f"blocks '{b.label}' revision {r.version}", r.turn_id) for b in self.blocks for r in b.history),
        ]:
            if turn_id is not None and turn_id not in turns:
                raise ValueError(f"{where} names turn {turn_id}, which is not among the document's turns")
        for i, turn in enumerate(self.turns):
            seqs = [event.get("seq") for event in turn.events]
            if len(set(map(str, seqs))) != len(seqs):
                raise ValueError(f"turns[{i}] has two events with the same seq")
        keys = [t.idempotency_key for t in self.turns if t.idempotency_key is not None]
        if len(set(keys)) != len(keys):
            raise ValueError("two turns have the same idempotency_key")
        return self


def _passage_references(passages: list[PassageDoc], messages: list[MessageDoc]) -> None:
    """A passage's successor is one of the document's passages, and each of its sources one of its messages or
    passages other than itself (each id once in the document: an import maps it to one new row)."""
    passage_ids = Counter(p.id for p in passages)
    rows = passage_ids + Counter(m.id for m in messages)
    held: dict[str, int] = {}
    for i, passage in enumerate(passages):
        if passage.superseded_by is not None and passage_ids[passage.superseded_by] != 1:
            raise ValueError(
                f"passages[{i}] is superseded by {passage.superseded_by}, which is not one of the document's passages"
            )
        for source in passage.sources:
            if source == passage.id:
                raise ValueError(f"passages[{i}] names itself ({source}) among its sources")
            if rows[source] != 1:
                which = "is not one of the document's messages or passages" if not rows[source] else "is there twice"
                raise ValueError(f"passages[{i}] names source {source}, which {which}")
        if passage.key is not None and passage.superseded_by is None:
            if (other := held.setdefault(passage.key, i)) != i:
                raise ValueError(f"passages[{other}] and passages[{i}] are both current under key {passage.key!r}")


class ImportResult(BaseModel):
    agent: AgentRead
    source: Literal["engram", "letta"] = Field(description="what the file was: an Engram export or a Letta agent file")
    blocks: int
    revisions: int
    passages: int
    messages: int
    turns: int
    embedded: int = Field(description="passages and messages embedded on import (no vector, or another model's)")
    skipped_tools: list[str] = Field(
        default_factory=list, description="Letta: the agent's tools Engram does not have (not imported)"
    )
    mapped_tools: dict[str, str] = Field(
        default_factory=dict, description="Letta: tools imported as the Engram tool that does the same job"
    )
    notes: list[str] = Field(default_factory=list, description="what the import changed or left out, and why")
