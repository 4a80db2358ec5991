import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Column, DateTime, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlmodel import Field, SQLModel


class QuotaCounter(SQLModel, table=True):
    """What one tenant or key used of one metric in one fixed window (a minute, or a UTC day)."""

    __tablename__ = "quota_counters"

    scope: str = Field(sa_column=Column(Text, primary_key=True))  # tenant | key
    subject_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    metric: str = Field(sa_column=Column(Text, primary_key=True))  # requests | turns | llm_tokens
    window_start: datetime = Field(sa_column=Column(DateTime(timezone=True), primary_key=True))
    used: int = Field(sa_column=Column(BigInteger, nullable=False))
