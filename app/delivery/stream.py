"""The one way turn events reach clients. The runner's events reach the EventHub once their transaction has
committed (through relay.Broadcast; other replicas' events arrive there through the relay); `POST …/chat` collects
a turn's events from the hub, SSE forwards them as they come, and the WebSocket forwards every event of its agent.
A new event type or stop reason therefore needs no change here or in the router. What a turn is, from its quota
admission to its memory pass, is app/chat/turns.py's: here it is only started and followed."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from app.chat.events import Event, MessageDelta
from app.chat.turn_state import TurnResult
from app.chat.turns import ChatTurns
from app.delivery.hub import EventHub
from app.detached import DetachedTasks
from app.errors import ServiceUnavailable, TurnStopped
from app.quotas.service import Meter


class TurnStreams:
    def __init__(
        self,
        turns: ChatTurns,
        tasks: DetachedTasks[TurnResult],
        hub: EventHub,
        stopping: Callable[[], bool] = lambda: False,
    ):
        self.turns = turns
        self.tasks = tasks
        self.hub = hub
        self.stopping = stopping  # the service is shutting down (app/api/draining.py)

    def watch(self, agent_id: uuid.UUID, *, deltas: bool = False) -> AbstractAsyncContextManager[asyncio.Queue[Event | None]]:
        """Every event of the agent's turns, from whichever replica runs them (None: fell too far behind); with
        `deltas`, also the replies' `message_delta` events of the turns this replica runs."""
        return self.hub.subscribe(agent_id, deltas=deltas)

    def start(
        self, agent_id: uuid.UUID, message: str, idempotency_key: str | None, meter: Meter | None = None
    ) -> asyncio.Task[TurnResult]:
        """Start a turn without following it (the WebSocket follows its agent's whole stream instead)."""
        return self.tasks.spawn(self.turns.run(agent_id, message, idempotency_key, uuid.uuid4(), meter))

    async def follow(
        self,
        agent_id: uuid.UUID,
        message: str,
        idempotency_key: str | None,
        meter: Meter | None = None,
        *,
        deltas: bool = False,
    ) -> AsyncIterator[Event]:
        """Start a turn and yield its events in order, through `turn_completed` (with `deltas`, the reply's
        `message_delta` events among them). A refused turn (unknown agent, another turn running, no LLM) raises
        before the first event; an idempotent replay yields the stored events of the earlier turn (without
        `turn_completed` when that turn is still running)."""
        turn_id = uuid.uuid4()
        last_seq = -1  # of the last stored event yielded
        try:
            async with self.hub.subscribe(agent_id, deltas=deltas) as queue:
                # Subscribed before the turn starts, so no event can be published before we listen.
                task = self.tasks.spawn(self.turns.run(agent_id, message, idempotency_key, turn_id, meter))
                while (event := await _next_event(queue, task)) is not None:
                    if event.turn_id != turn_id:
                        continue  # another turn of this agent, e.g. one still finishing when ours queued on the lock
                    yield event
                    if not isinstance(event, MessageDelta):
                        last_seq = event.seq
                    if event.type == "turn_completed":
                        # A turn stopped by an internal error raises after its last event: POST answers 503 then.
                        await asyncio.shield(task)
                        return
            # The turn's task has ended (or the hub dropped us for falling behind): its result holds what is left.
            result = await asyncio.shield(task)  # raises the refusal as a normal HTTP error
        except asyncio.CancelledError:
            if not self.stopping():  # a client gone, say: nobody to answer
                raise
            raise _shut_down(turn_id, started=last_seq >= 0) from None
        for event in result.events:
            if result.turn_id != turn_id or event.seq > last_seq:
                yield event


def _shut_down(turn_id: uuid.UUID, *, started: bool) -> ServiceUnavailable:
    """A shutdown past its grace cancels the requests still waiting and the turns still running: they answer with an
    error the client can read (naming the turn, once it started) rather than a bare 500."""
    current = asyncio.current_task()
    if current is not None and current.cancelling():
        current.uncancel()
    if started:
        return TurnStopped(turn_id)
    return ServiceUnavailable("the server is shutting down: the turn did not start; send the message again")


async def _next_event(queue: asyncio.Queue[Event | None], task: asyncio.Task[TurnResult]) -> Event | None:
    """The next event from the hub, or None once the task has ended and its events are all read. The runner
    publishes before it returns, so a finished task's events are already queued."""
    if queue.empty() and not task.done():
        getter = asyncio.ensure_future(queue.get())
        try:
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if getter.done() and not getter.cancelled():
            return getter.result()
    return queue.get_nowait() if not queue.empty() else None


async def chained(first: Event, rest: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """A turn's events again from the first one, which a caller took to see the turn was not refused."""
    yield first
    async for event in rest:
        yield event
