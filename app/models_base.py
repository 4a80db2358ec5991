"""Column helpers shared by the table models of every domain, and typed access to their SQLAlchemy side: SQLModel
types a model's class attributes as their values (`Message.embedding: list[float] | None`). `sqlmodel.col` makes
one a column expression for where()/order_by(); `orm_attribute` and `table_of` cover the rest."""

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, ForeignKey, Table
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import QueryableAttribute, class_mapper
from sqlmodel import Field


def utcnow() -> datetime:
    return datetime.now(UTC)


def id_field() -> Any:
    return Field(default_factory=uuid.uuid4, primary_key=True)


def timestamp_field(*, index: bool = False) -> Any:
    return Field(default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False, index=index))


def agent_key() -> Any:
    """The agent of a row of a per-agent table: part of its primary key, which in the database begins with it
    (migrations 0015, 0016), as a distribution by agent needs."""
    return Field(sa_column=Column(UUID(as_uuid=True), ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True))


def orm_attribute(attribute: object) -> QueryableAttribute[Any]:
    """A table model's class attribute as SQLAlchemy maps it, for loader options such as defer()."""
    if not isinstance(attribute, QueryableAttribute):
        raise TypeError(f"not a mapped attribute: {attribute!r}")
    return attribute


def table_of(model: type[object]) -> Table:
    """The table a table model is mapped to."""
    table = class_mapper(model).local_table
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not mapped to a table")
    return table
