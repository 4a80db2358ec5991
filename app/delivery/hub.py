"""In-process fan-out of turn events to the WebSockets watching an agent. A watcher says whether it wants the
reply's `message_delta` events; the others never see them."""

import asyncio
import uuid
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.chat.events import Event, MessageDelta

MAX_BACKLOG = 1000


class WatcherQueue(asyncio.Queue[Event | None]):
    """A watcher's events. A delta that finds the previous one of the same message still waiting joins it: a reader
    slower than the model gets the reply in longer pieces rather than falling behind (or being let go) over them."""

    def _init(self, maxsize: int) -> None:
        self._queue: deque[Event | None] = deque()  # what asyncio.Queue's own _init makes, typed

    def _put(self, item: Event | None) -> None:
        last = self._queue[-1] if self._queue else None
        if isinstance(item, MessageDelta) and isinstance(last, MessageDelta) and last.call_id == item.call_id:
            self._queue[-1] = last.model_copy(update={"text": last.text + item.text, "seq": item.seq})
        else:
            self._queue.append(item)


class EventHub:
    def __init__(self) -> None:
        # each watcher's queue, and whether it wants deltas
        self._subscribers: dict[uuid.UUID, dict[asyncio.Queue[Event | None], bool]] = defaultdict(dict)

    def publish(self, event: Event) -> None:
        delta = isinstance(event, MessageDelta)
        for queue, deltas in list(self._subscribers.get(event.agent_id, {}).items()):
            if deltas or not delta:
                self.offer(queue, event)

    def offer(self, queue: asyncio.Queue[Event | None], event: Event) -> None:
        """Queue an event for one watcher. A watcher this far behind is dropped rather than buffering without bound;
        None ends its stream, and nothing more is queued after it."""
        backlog = queue.qsize()
        if backlog < MAX_BACKLOG:
            queue.put_nowait(event)
        elif backlog == MAX_BACKLOG:
            self._subscribers.get(event.agent_id, {}).pop(queue, None)
            queue.put_nowait(None)

    def watching(self, agent_id: uuid.UUID) -> bool:
        return bool(self._subscribers.get(agent_id))

    def wants_deltas(self, agent_id: uuid.UUID) -> bool:
        return any(self._subscribers.get(agent_id, {}).values())

    @asynccontextmanager
    async def subscribe(self, agent_id: uuid.UUID, *, deltas: bool = False) -> AsyncIterator[asyncio.Queue[Event | None]]:
        queue: asyncio.Queue[Event | None] = WatcherQueue()
        self._subscribers[agent_id][queue] = deltas
        try:
            yield queue
        finally:
            self._subscribers[agent_id].pop(queue, None)
            if not self._subscribers[agent_id]:
                self._subscribers.pop(agent_id, None)
