"""Opaque keyset cursors: base64 of (timestamp-or-number, uuid)."""

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Generic, TypeVar

from pydantic import BaseModel

from app.errors import Unprocessable

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = None


def split_page(
    rows: Sequence[T], limit: int, position: Callable[[T], tuple[datetime | int, uuid.UUID]]
) -> tuple[Sequence[T], str | None]:
    """`rows` fetched with limit + 1: the page, and the cursor of its last row when a further row exists."""
    page = rows[:limit]
    return page, (encode_cursor(*position(page[-1])) if len(rows) > limit else None)


def encode_cursor(position: datetime | int, row_id: uuid.UUID) -> str:
    key = position.isoformat() if isinstance(position, datetime) else position
    return base64.urlsafe_b64encode(json.dumps([key, str(row_id)]).encode()).decode()


def decode_time_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    key, row_id = _decode(cursor)
    if not isinstance(key, str):
        raise Unprocessable("cursor is not valid here")
    try:
        return datetime.fromisoformat(key), row_id
    except ValueError:
        raise Unprocessable("cursor is not valid here") from None


def decode_seq_cursor(cursor: str) -> tuple[int, uuid.UUID]:
    key, row_id = _decode(cursor)
    if not isinstance(key, int):
        raise Unprocessable("cursor is not valid here")
    return key, row_id


def _decode(cursor: str) -> tuple[str | int, uuid.UUID]:
    try:
        key, row_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(row_id, str) or not (isinstance(key, str) or (isinstance(key, int) and abs(key) < 2**63)):
            raise ValueError
        return key, uuid.UUID(row_id)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise Unprocessable("cursor is malformed: pass back next_cursor as it was returned") from None
