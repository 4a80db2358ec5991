"""EngramSession: the Agents SDK's Session over an agent's recall memory (its items as _items.py stores them)."""

import uuid
from collections.abc import Iterator
from typing import Any, cast

from agents import SessionSettings, TResponseInputItem
from agents.memory import coerce_session_settings, resolve_session_limit

from engram_client import _messages
from engram_client._core import Flow, Id
from engram_client.client import AsyncEngram
from engram_client.errors import NotFound
from engram_client.inputs import NewMessage
from engram_client.openai_agents._items import Item, Reader, stored

WINDOW = 50  # items the runner reads by default: older ones reach the model through recollection
PAGE = 200  # messages listed at once (the API's most)
HAND_IN = 500  # messages handed in at once (the API's most)


class EngramSession:
    """The conversation of the Engram agent `agent_id` as an Agents SDK session (the SDK's `Session` protocol):
    items added are handed in to the agent's recall memory, where recollection, search and memory passes find them;
    `get_items` reads the latest back, oldest first. The runner reads the latest `session_settings.limit` items
    (default 50; `SessionSettings(limit=None)`: all): what came before reaches the model through `memory_instructions`.
    Another EngramSession over the same agent (another process, a later run) goes on with the same conversation.
    `client`: an AsyncEngram of your own (default: one from ENGRAM_URL and ENGRAM_API_KEY)."""

    def __init__(
        self,
        agent_id: Id,
        *,
        client: AsyncEngram | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.session_id = str(agent_id)
        given = coerce_session_settings(session_settings) if session_settings is not None else None
        self.session_settings: SessionSettings | None = given or SessionSettings(limit=WINDOW)
        self.engram = client or AsyncEngram()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest `limit` items (default: `session_settings.limit`), oldest first."""
        found = await self.engram._runner.run(newest(self.agent_id, resolve_session_limit(limit, self.session_settings)))
        return [cast(TResponseInputItem, item) for item, _ in reversed(found)]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        messages = list(stored(cast(list[Item], items)))
        for batch in _batches(messages, HAND_IN):
            await self.engram.messages.add(self.agent_id, batch)

    async def pop_item(self) -> TResponseInputItem | None:
        """The latest item, forgotten: its messages are erased from recall memory (with what was drawn from them)."""
        found = await self.engram._runner.run(newest(self.agent_id, 1))
        if not found:
            return None
        [(item, message_ids)] = found
        for message_id in message_ids:
            await self.engram.messages.delete(self.agent_id, message_id)
        return cast(TResponseInputItem, item)

    async def clear_session(self) -> None:
        """Forget the whole conversation: every message of the agent's recall memory (a tool's result goes with the
        call it answers)."""
        for message_id in await self.engram._runner.run(said_ids(self.agent_id)):
            try:
                await self.engram.messages.delete(self.agent_id, message_id)
            except NotFound:
                pass  # gone with another (a call's results go with it)


def newest(agent_id: Id, limit: int | None) -> Flow[list[tuple[Item, list[uuid.UUID]]]]:
    """The latest `limit` items (None: all), newest first, each with the ids of the messages that hold it."""
    if limit is not None and limit <= 0:
        return []
    reader, cursor = Reader(), None
    while True:
        size = PAGE if limit is None else min(PAGE, limit + 1)  # one more: an item's earlier parts may follow
        page = yield from _messages.list_(agent_id, limit=size, cursor=cursor)
        for message in page.items:
            reader.read(message)
            if limit is not None and len(reader.items) >= limit:
                return reader.items[:limit]
        if page.next_cursor is None:
            reader.done()
            return reader.items
        cursor = page.next_cursor


def said_ids(agent_id: Id) -> Flow[list[uuid.UUID]]:
    """The ids of the agent's messages but tools' results (which are erased with the calls they answer)."""
    ids, cursor = [], None
    while True:
        page = yield from _messages.list_(agent_id, limit=PAGE, cursor=cursor)
        ids += [message.id for message in page.items if message.role != "tool"]
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def _batches(messages: list[NewMessage], size: int) -> Iterator[list[NewMessage]]:
    for start in range(0, len(messages), size):
        yield messages[start : start + size]
