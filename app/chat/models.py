import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlmodel import Field, SQLModel

from app.models_base import agent_key, id_field, timestamp_field


class Turn(SQLModel, table=True):
    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("agent_id", "idempotency_key"),
        Index(
            "ux_turns_one_running_pass",
            "agent_id",
            unique=True,
            postgresql_where=text("kind = 'memory_pass' AND status = 'running'"),
        ),
    )

    # Keyed by agent (migration 0016), as every per-agent table: what a distribution by agent needs.
    id: uuid.UUID = id_field()
    agent_id: uuid.UUID = agent_key()
    kind: str = Field(default="chat", sa_column=Column(Text, nullable=False, server_default="chat"))  # chat | memory_pass
    # A memory pass: the last message it went over (the next pass starts after it).
    through_seq: int | None = Field(default=None, sa_column=Column(BigInteger))
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
    __table_args__ = (ForeignKeyConstraint(["agent_id", "turn_id"], ["turns.agent_id", "turns.id"], ondelete="CASCADE"),)

    agent_id: uuid.UUID = agent_key()
    turn_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    seq: int = Field(primary_key=True)
    payload: dict[str, Any] = Field(sa_column=Column(JSONB, nullable=False))
    created_at: datetime = timestamp_field()
