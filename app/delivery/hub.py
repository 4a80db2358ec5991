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
            self.offer(queue, event)

    def offer(self, queue: asyncio.Queue[Event | None], event: Event) -> None:
        """Queue an event for one watcher. A watcher this far behind is dropped rather than buffering without bound;
        None ends its stream, and nothing more is queued after it."""
        backlog = queue.qsize()
        if backlog < MAX_BACKLOG:
            queue.put_nowait(event)
        elif backlog == MAX_BACKLOG:
            self._subscribers.get(event.agent_id, set()).discard(queue)
            queue.put_nowait(None)

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
