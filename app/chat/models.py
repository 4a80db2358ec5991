import json
import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Column,
    Computed,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR, UUID
from sqlmodel import Field, SQLModel

from app.memory.models import TOKEN_COUNT_EXPRESSION, TSV_EXPRESSION
from app.models_base import agent_fk, id_field, timestamp_field


class Turn(SQLModel, table=True):
    __tablename__ = "turns"
    __table_args__ = (UniqueConstraint("agent_id", "idempotency_key"),)

    id: uuid.UUID = id_field()
    agent_id: uuid.UUID = agent_fk()
    status: str = "running"  # running | completed | interrupted
    stop_reason: str | None = None
    message: str = Field(sa_column=Column(Text, nullable=False))
    reply: str | None = Field(default=None, sa_column=Column(Text))
    usage: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSONB, nullable=False))
    idempotency_key: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = timestamp_field()
    finished_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class TurnEvent(SQLModel, table=True):
    __tablename__ = "turn_events"

    turn_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True))
    seq: int = Field(primary_key=True)
    agent_id: uuid.UUID = agent_fk()
    payload: dict[str, Any] = Field(sa_column=Column(JSONB, nullable=False))
    created_at: datetime = timestamp_field()


class Message(SQLModel, table=True):
    __tablename__ = "messages"
    __table_args__ = (
        Index("ix_messages_agent_seq", "agent_id", "seq"),
        Index("ix_messages_tsv", "tsv", postgresql_using="gin"),
        Index("ix_messages_embedding", "embedding", postgresql_using="hnsw", postgresql_ops={"embedding": "vector_cosine_ops"}),
    )

    id: uuid.UUID = id_field()
    seq: int | None = Field(default=None, sa_column=Column(BigInteger, Identity(), nullable=False, unique=True))
    agent_id: uuid.UUID = agent_fk()
    turn_id: uuid.UUID | None = Field(default=None, sa_column=Column(UUID(as_uuid=True), ForeignKey("turns.id", ondelete="SET NULL"), index=True))
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

    def recall_text(self) -> str:
        """What this message said, for search and display: its text plus anything it sent to the user."""
        sent = []
        for call in self.tool_calls or []:
            if call.get("name") == "send_message":
                try:
                    sent.append(str(json.loads(call.get("arguments") or "{}").get("text", "")))
                except (ValueError, AttributeError):
                    continue
        return "\n".join(part for part in [self.content, *sent] if part)
