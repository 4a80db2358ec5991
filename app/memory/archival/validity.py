"""Which passages a read sees, as a value the API, the services and the SQL share."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, or_
from sqlmodel import col

from app.memory.models import ArchivalPassage


@dataclass(frozen=True)
class Validity:
    """Which passages a read sees: the current ones (not superseded; a fact dated in the future is current), those
    valid at `as_of` (it had happened by then, and had not been superseded yet), or every one."""

    as_of: datetime | None = None
    include_superseded: bool = False

    def sql(self) -> tuple[list[str], dict[str, Any]]:
        """The conditions as SQL over the table's columns, and their parameters."""
        if self.as_of is not None:
            return ["occurred_at <= :as_of", "(valid_until IS NULL OR valid_until > :as_of)"], {"as_of": self.as_of}
        return ([] if self.include_superseded else ["superseded_by IS NULL"]), {}

    def applied(self, query: Select[Any]) -> Select[Any]:
        if self.as_of is not None:
            valid_until = col(ArchivalPassage.valid_until)
            return query.where(
                col(ArchivalPassage.occurred_at) <= self.as_of, or_(valid_until.is_(None), valid_until > self.as_of)
            )
        return query if self.include_superseded else query.where(col(ArchivalPassage.superseded_by).is_(None))


CURRENT = Validity()
