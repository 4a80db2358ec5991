"""In-process fan-out of turn events to the WebSockets watching an agent."""

import asyncio
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.chat.events import Event

MAX_BACKLOG = 1000


class EventHub:
    def __init__(self) -> None:
        self._subscribers: dict[uuid.UUID, set[asyncio.Queue[Event | None]]] = defaultdict(set)

    def publish(self, event: Event) -> None:
        for queue in list(self._subscribers.get(event.agent_id, ())):
            if queue.qsize() >= MAX_BACKLOG:
                # A watcher this far behind is dropped rather than buffering without bound; None ends its stream.
                self._subscribers[event.agent_id].discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(event)

    def watching(self, agent_id: uuid.UUID) -> bool:
        return bool(self._subscribers.get(agent_id))

    @asynccontextmanager
    async def subscribe(self, agent_id: uuid.UUID) -> AsyncIterator[asyncio.Queue[Event | None]]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._subscribers[agent_id].add(queue)
        try:
            yield queue
        finally:
            self._subscribers[agent_id].discard(queue)
            if not self._subscribers[agent_id]:
                self._subscribers.pop(agent_id, None)
