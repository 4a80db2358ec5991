"""Letta's paging: `after` / `before` name an item by id, `order` is asc or desc by creation, `limit` counts items.
A list route takes them through one dependency (`paging`) as a LettaPage, which cuts the page from a list in Engram's
order or from Engram's items walked newest first. Engram's own pages are newest first with opaque cursors, so a walk
goes as far as the page needs when it is newest first from the top or after an item, through the whole list
otherwise (an oldest-first page, or one before an item)."""

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, Query

from app.errors import NotFound
from app.letta_api.common import Kind, engram_id

T = TypeVar("T")
Order = Literal["asc", "desc"]
WALK_PAGE = 200  # Engram's largest page

Limit = Annotated[int, Query(ge=1, le=1000, description="items in the page")]
Cursor = Annotated[str | None, Query(description="an item's id: the page starts after it (in the order asked for)")]
Before = Annotated[str | None, Query(description="an item's id: the page ends before it (in the order asked for)")]


@dataclass(frozen=True)
class LettaPage:
    after: str | None
    before: str | None
    limit: int
    order: Order

    def cut(self, items: Sequence[T], key: Callable[[T], uuid.UUID], kind: Kind) -> list[T]:
        """The page of `items`, given in Engram's order (oldest first)."""
        in_order = list(reversed(items)) if self.order == "desc" else list(items)
        after, before = self._ids(kind)
        return _window(in_order, key, kind, after=after, before=before, limit=self.limit)

    async def walked(self, newest_first: AsyncIterator[T], key: Callable[[T], uuid.UUID], kind: Kind) -> list[T]:
        """The page of the items of a newest-first walk (`walk`), read only as far as it needs."""
        after, before = self._ids(kind)
        if self.order == "asc" or before is not None:
            return self.cut(list(reversed([item async for item in newest_first])), key, kind)
        page: list[T] = []
        found = after is None
        async for item in newest_first:
            if found:
                page.append(item)
                if len(page) == self.limit:
                    return page
            elif key(item) == after:
                found = True
        if not found:
            raise NotFound(f"no {kind} {self.after!r} to page after")
        return page

    def _ids(self, kind: Kind) -> tuple[uuid.UUID | None, uuid.UUID | None]:
        return (
            engram_id(kind, self.after) if self.after else None,
            engram_id(kind, self.before) if self.before else None,
        )


def paging(default_order: Order, *, default_limit: int = 100, ascending: bool = False) -> Any:
    """A list route's LettaPage, from Letta's parameters with the defaults of Letta's route. `ascending`: the route
    also takes Letta's older flag (after `order`, which has no default then)."""

    async def page(
        after: Cursor = None, before: Before = None, limit: Limit = default_limit, order: Order = default_order
    ) -> LettaPage:
        return LettaPage(after, before, limit, order)

    async def page_or_ascending(
        after: Cursor = None,
        before: Before = None,
        limit: Limit = default_limit,
        order: Order | None = None,
        ascending: bool | None = None,
    ) -> LettaPage:
        return LettaPage(after, before, limit, ordered(order, ascending, default_order))

    return Depends(page_or_ascending if ascending else page)


async def walk(fetch: Callable[[str | None], Awaitable[tuple[Sequence[T], str | None]]]) -> AsyncIterator[T]:
    """Every item of Engram's newest-first pages, one page read at a time."""
    cursor: str | None = None
    while True:
        page, cursor = await fetch(cursor)
        for item in page:
            yield item
        if cursor is None:
            return


def ordered(order: Order | None, ascending: bool | None, default: Order) -> Order:
    """Letta's `order`, or its older `ascending` flag, or the route's default."""
    if order is not None:
        return order
    if ascending is not None:
        return "asc" if ascending else "desc"
    return default


def _window(
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
