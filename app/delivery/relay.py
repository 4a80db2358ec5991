"""Turn events across replicas: a replica that commits events sends a NOTIFY naming them (payloads are capped at
8 kB, so the events themselves are read back from turn_events); every other replica LISTENs and hands them to its
local WebSockets. No infrastructure beyond PostgreSQL; the listener reconnects by itself after a database outage.
Broadcast is the runner's EventOutlet: it announces a turn's events to the other replicas and publishes them here."""

import asyncio
import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat.events import Event
from app.chat.service import turn_events
from app.delivery.hub import EventHub

log = logging.getLogger("engram.relay")
CHANNEL = "engram_events"
RECONNECT_SECONDS = 2.0
CONNECT_SECONDS = 5.0


async def announce(session: AsyncSession, origin: uuid.UUID, turn_id: uuid.UUID, agent_id: uuid.UUID, seqs: list[int]) -> None:
    """Queue a notification for the events just written; PostgreSQL sends it only if the transaction commits."""
    payload = json.dumps(
        {"origin": str(origin), "turn_id": str(turn_id), "agent_id": str(agent_id), "from": min(seqs), "to": max(seqs)}
    )
    await session.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": CHANNEL, "payload": payload})


class Broadcast:
    """Where the runner's events go (chat.runner.EventOutlet): a notification for the other replicas, sent when
    the events' transaction commits, then this process's watchers. origin: this process's id, so that its relay
    ignores its own events coming back."""

    def __init__(self, hub: EventHub, origin: uuid.UUID):
        self.hub = hub
        self.origin = origin

    async def stored(self, session: AsyncSession, turn_id: uuid.UUID, agent_id: uuid.UUID, events: Sequence[Event]) -> None:
        await announce(session, self.origin, turn_id, agent_id, [e.seq for e in events])

    def committed(self, events: Sequence[Event]) -> None:
        for event in events:
            self.hub.publish(event)

    def live(self, event: Event) -> None:
        """An event that is never stored (a reply's delta): to this process's watchers only, at once."""
        self.hub.publish(event)

    def wants_deltas(self, agent_id: uuid.UUID) -> bool:
        return self.hub.wants_deltas(agent_id)


class EventRelay:
    def __init__(self, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], hub: EventHub, origin: uuid.UUID):
        self.sessions = sessions
        self.hub = hub
        self.origin = origin
        # Notifications arrive in commit order; one consumer keeps that order for the watchers.
        self._notes: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._listen_forever(), name="engram-event-relay"),
            asyncio.create_task(self._deliver_forever(), name="engram-event-delivery"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _listen_forever(self) -> None:
        while True:
            try:
                # A connection of its own, outside the pool: held for good, it would be one pooled connection fewer
                # for requests, and the pool could only be opened whole once the relay held it.
                raw = await asyncpg.connect(self._dsn, timeout=CONNECT_SECONDS)
                try:
                    closed = asyncio.get_running_loop().create_future()
                    raw.add_termination_listener(lambda _, closed=closed: closed.done() or closed.set_result(None))
                    await raw.add_listener(CHANNEL, self._on_notify)
                    log.info("listening for events of other replicas")
                    await closed  # until the connection is lost
                finally:
                    await asyncio.shield(raw.close(timeout=CONNECT_SECONDS))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is down or restarting: try again
                log.warning("event relay disconnected (%s); reconnecting", type(exc).__name__)
            await asyncio.sleep(RECONNECT_SECONDS)

    def _on_notify(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        note = json.loads(payload)
        if note["origin"] != str(self.origin) and self.hub.watching(uuid.UUID(note["agent_id"])):
            self._notes.put_nowait(note)

    async def _deliver_forever(self) -> None:
        while True:
            note = await self._notes.get()
            try:
                await self._relay(uuid.UUID(note["agent_id"]), uuid.UUID(note["turn_id"]), int(note["from"]), int(note["to"]))
            except Exception:  # the database may be down; watchers can replay the turn
                log.warning("could not relay events of turn %s", note["turn_id"], exc_info=True)

    async def _relay(self, agent_id: uuid.UUID, turn_id: uuid.UUID, first: int, last: int) -> None:
        async with self.sessions() as session:
            stored = await turn_events(session, agent_id, turn_id, after_seq=first - 1)
        for event in stored:
            if event.seq <= last:
                self.hub.publish(event)
