import uuid
from datetime import datetime

from sqlalchemy import Column, ForeignKey, Index, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlmodel import Field, SQLModel

from app.models_base import id_field, timestamp_field


class Agent(SQLModel, table=True):
    __tablename__ = "agents"
    # Agents are reached by name (an OpenAI `model`, the CLI): unique within a tenant (alembic 0014).
    __table_args__ = (Index("ux_agents_tenant_name", "tenant_id", "name", unique=True),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(
        sa_column=Column(UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name: str = Field(sa_column=Column(Text, nullable=False))
    system: str | None = Field(default=None, sa_column=Column(Text))
    model: str | None = Field(default=None, sa_column=Column(Text))
    # Recall memory management: messages before context_start_seq left the context; summary stands for them.
    summary: str | None = Field(default=None, sa_column=Column(Text))
    context_start_seq: int = 0
    created_at: datetime = timestamp_field()
    updated_at: datetime = timestamp_field()
