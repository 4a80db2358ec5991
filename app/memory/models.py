"""Table models of the three memories: core (blocks and their revisions), archival (passages) and recall (every
message ever exchanged)."""

import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Computed,
    DateTime,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlmodel import Field, SQLModel

from app.models_base import agent_key, id_field, timestamp_field

TSV_EXPRESSION = "to_tsvector('simple'::regconfig, search_text)"
TOKEN_COUNT_EXPRESSION = "cardinality(string_to_array(search_text, ' '))"
# Both tables also have `term_counts`, generated as engram_term_counts(search_text) (migration 0013): each lexical
# token and how often it occurs, BM25's term frequencies. Only the search statement reads it (app/memory/search/hybrid.py),
# so it is not mapped here: no read of a row decodes it, and no write can set it.
# What the full-text index holds: a row's lexemes and one for its agent (with a space, which no query token has), so
# that a search for (terms AND agent) gets only the agent's rows from the index (migration 0010, app/memory/search/hybrid.py).
AGENT_TSV_EXPRESSION = "(tsv || array_to_tsvector(ARRAY['agent ' || agent_id::text]))"


def _when_stored(context: DefaultExecutionContext) -> Any:
    parameters: Callable[[], dict[str, Any]] = context.get_current_parameters  # SQLAlchemy leaves it untyped
    return parameters()["created_at"]


def occurred_field() -> Any:
    """When it happened or was said (`created_at`: when it was stored). Not given (None): the row's created_at."""
    return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=False, default=_when_stored))


class MemoryBlock(SQLModel, table=True):
    __tablename__ = "memory_blocks"
    __table_args__ = (UniqueConstraint("agent_id", "label"),)

    # Keyed by agent (migration 0016), as every per-agent table: what a distribution by agent needs.
    id: uuid.UUID = id_field()
    agent_id: uuid.UUID = agent_key()
    label: str = Field(sa_column=Column(Text, nullable=False))
    value: str = Field(default="", sa_column=Column(Text, nullable=False))
    char_limit: int
    description: str | None = Field(default=None, sa_column=Column(Text))
    read_only: bool = False
    version: int = 1
    updated_at: datetime = timestamp_field()


class MemoryBlockRevision(SQLModel, table=True):
    __tablename__ = "memory_block_revisions"
    __table_args__ = (
        UniqueConstraint("agent_id", "block_id", "version", name="uq_memory_block_revisions_block_version"),
        ForeignKeyConstraint(["agent_id", "block_id"], ["memory_blocks.agent_id", "memory_blocks.id"], ondelete="CASCADE"),
    )

    id: uuid.UUID = id_field()
    agent_id: uuid.UUID = agent_key()
    block_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    version: int
    value: str = Field(sa_column=Column(Text, nullable=False))
    source: str  # "agent" | "api"
    turn_id: uuid.UUID | None = None
    created_at: datetime = timestamp_field()


class ArchivalPassage(SQLModel, table=True):
    __tablename__ = "archival_passages"
    __table_args__ = (
        Index(
            "ix_archival_passages_agent_tsv",
            text(AGENT_TSV_EXPRESSION),
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index("ix_archival_passages_agent_created", "agent_id", "created_at"),
        Index("ix_archival_passages_agent_occurred", "agent_id", "occurred_at"),
        Index("ix_archival_passages_superseded_by", "superseded_by", postgresql_where="superseded_by IS NOT NULL"),
        Index("ix_archival_passages_sources", "sources", postgresql_using="gin", postgresql_where="sources <> '{}'"),
        # a key names one current passage of its agent; its superseded versions keep it (migration 0019)
        Index(
            "ux_archival_passages_agent_current_key",
            "agent_id",
            "key",
            unique=True,
            postgresql_where="key IS NOT NULL AND superseded_by IS NULL",
        ),
        Index("ix_archival_passages_agent_key", "agent_id", "key", postgresql_where="key IS NOT NULL"),
        # a successor is the same agent's
        ForeignKeyConstraint(
            ["agent_id", "superseded_by"], ["archival_passages.agent_id", "archival_passages.id"], ondelete="SET NULL"
        ),
    )

    # Partitioned by agent (migration 0015): the agent is part of the key.
    id: uuid.UUID = id_field()
    agent_id: uuid.UUID = agent_key()
    content: str = Field(sa_column=Column(Text, nullable=False))
    tags: list[str] = Field(default_factory=list, sa_column=Column(ARRAY(Text), nullable=False))
    embedding: list[float] = Field(sa_column=Column(Vector(), nullable=False))
    embedding_model: str = Field(sa_column=Column(Text, nullable=False))
    # Lexical tokens (words + CJK bigrams) computed in Python; tsv is generated from it.
    search_text: str = Field(default="", sa_column=Column(Text, nullable=False))
    tsv: str | None = Field(default=None, sa_column=Column(TSVECTOR, Computed(TSV_EXPRESSION, persisted=True)))
    token_count: int | None = Field(default=None, sa_column=Column(Integer, Computed(TOKEN_COUNT_EXPRESSION, persisted=True)))
    created_at: datetime = timestamp_field()
    occurred_at: datetime = occurred_field()
    # A superseded passage: the one that replaced it, and from when (its occurred_at). Both or neither are set;
    # a passage is current while neither is.
    valid_until: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    superseded_by: uuid.UUID | None = Field(default=None, sa_column=Column(UUID(as_uuid=True)))
    # Provenance: the ids of this agent's messages and passages it was distilled from (a fact from what was said);
    # empty for a passage stored as it was given. Erasing its last source erases it (app/memory/archival/erasure.py).
    sources: list[uuid.UUID] = Field(
        default_factory=list, sa_column=Column(ARRAY(UUID(as_uuid=True)), nullable=False, server_default="{}")
    )
    # The caller's name for it (PUT …/archival/keys/{key}): unique among the agent's current passages; a superseded
    # passage keeps the key of its successor, as one of the key's earlier versions.
    key: str | None = Field(default=None, sa_column=Column(Text))


class Message(SQLModel, table=True):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("agent_id", "seq", name="messages_seq_key"),
        Index("ix_messages_agent_tsv", text(AGENT_TSV_EXPRESSION), postgresql_using="gin", postgresql_with={"fastupdate": "off"}),
        Index(
            "ux_messages_agent_external_id", "agent_id", "external_id", unique=True, postgresql_where="external_id IS NOT NULL"
        ),
        ForeignKeyConstraint(["agent_id", "turn_id"], ["turns.agent_id", "turns.id"], ondelete="SET NULL (turn_id)"),
    )

    # Partitioned by agent (migration 0015): the agent is part of the key; seq orders an agent's messages.
    id: uuid.UUID = id_field()
    seq: int | None = Field(default=None, sa_column=Column(BigInteger, Identity(), nullable=False))
    agent_id: uuid.UUID = agent_key()
    turn_id: uuid.UUID | None = Field(default=None, sa_column=Column(UUID(as_uuid=True), index=True))
    role: str  # user | assistant | tool | system
    content: str = Field(default="", sa_column=Column(Text, nullable=False))
    tool_calls: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSONB))
    tool_call_id: str | None = None
    name: str | None = None
    embedding: list[float] | None = Field(default=None, sa_column=Column(Vector()))
    embedding_model: str | None = Field(default=None, sa_column=Column(Text))
    search_text: str = Field(default="", sa_column=Column(Text, nullable=False))
    tsv: str | None = Field(default=None, sa_column=Column(TSVECTOR, Computed(TSV_EXPRESSION, persisted=True)))
    token_count: int | None = Field(default=None, sa_column=Column(Integer, Computed(TOKEN_COUNT_EXPRESSION, persisted=True)))
    created_at: datetime = timestamp_field(index=True)
    occurred_at: datetime = occurred_field()
    # Handed in by a caller that ran its own LLM (POST …/messages): recall memory only, never the agent's context.
    handed_in: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default="false"))
    external_id: str | None = Field(default=None, sa_column=Column(Text))  # the caller's id of a handed-in message

    def recall_text(self) -> str:
        """What this message said, for search and display: its text plus anything it sent to the user."""
        return "\n".join(part for part in [self.content, *self.sent()] if part)

    def sent(self) -> list[str]:
        """The texts an assistant's message sent to the user (its send_message calls): a call without a text, or with
        one that is empty or not a string, sent nothing (the tool refused it)."""
        sent = []
        for call in self.tool_calls or []:
            if call.get("name") == "send_message":
                try:
                    said = json.loads(call.get("arguments") or "{}").get("text")
                except (ValueError, AttributeError):
                    continue
                if isinstance(said, str) and said:
                    sent.append(said)
        return sent


class ImportJob(SQLModel, table=True):
    """A bulk import of passages into archival memory (POST …/archival/import), stored slice by slice by whichever
    process holds the job's lock; its items wait in import_items until they are stored."""

    __tablename__ = "import_jobs"
    __table_args__ = (Index("ix_import_jobs_pending", "created_at", postgresql_where="status IN ('queued', 'running')"),)

    id: uuid.UUID = id_field()
    agent_id: uuid.UUID = agent_key()
    status: str = Field(default="queued", sa_column=Column(Text, nullable=False))  # queued|running|done|cancelled|failed
    total: int
    done: int = 0  # items stored (near-duplicates of stored passages included) or skipped
    duplicates: int = 0  # of them, near-duplicates: the stored passage was kept, none added
    skipped: int = 0  # of them, not stored: drawn only from sources erased since the job was submitted
    error: str | None = Field(default=None, sa_column=Column(Text))  # the last failure (see app/memory/archival/imports.py)
    attempts: int = 0  # failures in a row; a stored slice resets it
    retry_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))  # not run before then
    created_at: datetime = timestamp_field()
    updated_at: datetime = timestamp_field()
    finished_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    # Where the current run (this process's, after any restart) began: the rate counts only its own work.
    run_started_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    run_started_done: int = 0


class ImportItem(SQLModel, table=True):
    """An item of an import job not stored yet; deleted in the transaction that stores it, so none is stored twice."""

    __tablename__ = "import_items"
    __table_args__ = (
        ForeignKeyConstraint(["agent_id", "job_id"], ["import_jobs.agent_id", "import_jobs.id"], ondelete="CASCADE"),
    )

    agent_id: uuid.UUID = agent_key()
    job_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    position: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    # The passage as it was given (a PassageWrite as JSON, migration 0021): a field added to a passage travels in it.
    passage: dict[str, Any] = Field(sa_column=Column(JSONB, nullable=False))
