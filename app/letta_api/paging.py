"""Letta's paging: `after` / `before` name an item by id, `order` is asc or desc by creation, `limit` counts items.
Engram's own pages are newest first with opaque cursors, so a Letta page is cut from Engram's items walked newest
first: as far as the page needs when it is newest first from the top or after an item, the whole list otherwise
(an oldest-first page, or one before an item)."""

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Annotated, Literal, TypeVar

from fastapi import Query

from app.errors import NotFound
from app.letta_api.common import Kind, engram_id

T = TypeVar("T")
Order = Literal["asc", "desc"]
WALK_PAGE = 200  # Engram's largest page

Limit = Annotated[int, Query(ge=1, le=1000, description="items in the page")]
Cursor = Annotated[str | None, Query(description="an item's id: the page starts after it (in the order asked for)")]
Before = Annotated[str | None, Query(description="an item's id: the page ends before it (in the order asked for)")]


async def walk(fetch: Callable[[str | None], Awaitable[tuple[Sequence[T], str | None]]]) -> AsyncIterator[T]:
    """Every item of Engram's newest-first pages, one page read at a time."""
    cursor: str | None = None
    while True:
        page, cursor = await fetch(cursor)
        for item in page:
            yield item
        if cursor is None:
            return


async def letta_page(
    newest_first: AsyncIterator[T],
    key: Callable[[T], uuid.UUID],
    kind: Kind,
    *,
    order: Order,
    after: str | None,
    before: str | None,
    limit: int,
) -> list[T]:
    after_id = engram_id(kind, after) if after else None
    before_id = engram_id(kind, before) if before else None
    if order == "desc" and before_id is None:
        page: list[T] = []
        found = after_id is None
        async for item in newest_first:
            if found:
                page.append(item)
                if len(page) == limit:
                    return page
            elif key(item) == after_id:
                found = True
        if not found:
            raise NotFound(f"no {kind} {after!r} to page after")
        return page
    items = [item async for item in newest_first]
    if order == "asc":
        items.reverse()
    return cut(items, key, kind, after=after_id, before=before_id, limit=limit)


def cut(
    items: Sequence[T],
    key: Callable[[T], uuid.UUID],
    kind: Kind,
    *,
    after: uuid.UUID | None,
    before: uuid.UUID | None,
    limit: int,
) -> list[T]:
    """The page of `items` (already in the order asked for) after `after` and before `before`; with `before` alone,
    the `limit` items nearest to it (paging backwards)."""
    keys = [key(item) for item in items]
    start = _position(keys, after, kind) + 1 if after is not None else 0
    end = _position(keys, before, kind) if before is not None else len(items)
    window = list(items[start:end])
    return window[-limit:] if before is not None and after is None else window[:limit]


def _position(keys: list[uuid.UUID], wanted: uuid.UUID, kind: Kind) -> int:
    try:
        return keys.index(wanted)
    except ValueError:
        raise NotFound(f"no {kind} {kind}-{wanted} to page from") from None


def ordered(order: Order | None, ascending: bool | None, default: Order) -> Order:
    """Letta's `order`, or its older `ascending` flag, or the route's default."""
    if order is not None:
        return order
    if ascending is not None:
        return "asc" if ascending else "desc"
    return default
