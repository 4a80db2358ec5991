import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Column, DateTime, ForeignKey, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlmodel import Field, SQLModel

from app.models_base import id_field, timestamp_field

# Agents created before tenants existed, and every agent of a service run without keys, belong here.
DEFAULT_TENANT_ID = uuid.UUID(int=0)


class Tenant(SQLModel, table=True):
    __tablename__ = "tenants"

    id: uuid.UUID = id_field()
    name: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = timestamp_field()


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(
        sa_column=Column(UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name: str = Field(sa_column=Column(Text, nullable=False))
    prefix: str = Field(sa_column=Column(Text, nullable=False))  # shown in listings to tell keys apart
    key_hash: str = Field(sa_column=Column(Text, nullable=False, unique=True))
    created_at: datetime = timestamp_field()
    revoked_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    # Quotas of this key on top of its tenant's (None: only the tenant's apply; see app/quotas).
    requests_per_minute: int | None = Field(default=None, sa_column=Column(BigInteger))
    turns_per_minute: int | None = Field(default=None, sa_column=Column(BigInteger))
    llm_tokens_per_day: int | None = Field(default=None, sa_column=Column(BigInteger))
