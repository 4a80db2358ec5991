"""Which requests read on a read replica (app/replicas.py), and what happens when the replica fails them.

A GET or HEAD request reads on a replica (`replica_for`, used by the session dependency), unless its caller wrote to
the same agent within the replicas' staleness bound (read-your-writes), or no replica is usable; so does a POST whose
endpoint is marked `reads_only` (a query sent as a body: the recollection API). Everything else — turns, writes,
imports, MCP — runs on the primary, and each response it sends marks its caller as having written (to the agent its
path names, or to everything of the caller's).

A read whose replica fails before it has answered (the replica stopped, a query cancelled by a recovery conflict) is
run again on the primary, with the body it was sent: a read is safe to repeat, and nothing of the first attempt has
reached the client."""

import hashlib
import re
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.principal import presented_key
from app.db import DATABASE_FAILURES, failure_as_error
from app.errors import DatabaseUnreachable
from app.replicas import ReadReplicas, Replica
from app.runtime import runtime

READING_METHODS = frozenset({"GET", "HEAD"})
READS_ONLY = "engram_reads_only"  # an endpoint's attribute (`reads_only`)
REPLICA_FAILED = "engram.replica_failed"  # scope state: the read's replica failed it
PRIMARY_ONLY = "engram.primary_only"  # scope state: the read runs again, on the primary
# What a read on a replica may fail with (replica_failed sorts out which of them are the replica's).
REPLICA_FAILURES: tuple[type[Exception], ...] = (*DATABASE_FAILURES, DatabaseUnreachable)
_AGENT_IN_PATH = re.compile(r"/agents/(?:agent-)?([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})")


Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def reads_only(endpoint: Endpoint) -> Endpoint:
    """Marks a POST endpoint that only reads (`only_reads`)."""
    setattr(endpoint, READS_ONLY, True)
    return endpoint


def only_reads(scope: Scope) -> bool:
    """Whether the request only reads: a GET or HEAD, or a POST to a `reads_only` endpoint (known once routed, before
    its body is read)."""
    return scope.get("method") in READING_METHODS or getattr(scope.get("endpoint"), READS_ONLY, False)


def caller_of(scope: Scope) -> bytes | None:
    """Who sent the request, as far as read-your-writes goes: a digest of its API key (None: no key)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
    return hashlib.blake2b(key.encode(), digest_size=16).digest() if key else None


def agent_of(scope: Scope) -> uuid.UUID | None:
    found = _AGENT_IN_PATH.search(scope.get("path", ""))
    return uuid.UUID(found.group(1)) if found else None


def replica_for(scope: Scope, replicas: ReadReplicas | None) -> Replica | None:
    """The replica a request reads on (None: the primary)."""
    if replicas is None or not only_reads(scope) or scope.get("state", {}).get(PRIMARY_ONLY):
        return None
    if replicas.wrote(caller_of(scope), agent_of(scope)):
        return None
    return replicas.pick()


def replica_failed(scope: Scope, replicas: ReadReplicas, replica: Replica, error: Exception) -> None:
    """A database failure of the request on its replica. One of the replica's (unreachable, shutting down, a query
    cancelled by recovery): the request runs again on the primary, and the replica is skipped until a check finds it
    back. Any other (bad input, a timeout) would fail on the primary too: it is answered as it is."""
    if isinstance(error, DatabaseUnreachable) or isinstance(failure_as_error(error), DatabaseUnreachable):
        replicas.failed(replica, error)
        scope.setdefault("state", {})[REPLICA_FAILED] = True


class ReplicaReads:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = getattr(scope.get("app"), "state", None)
        replicas = runtime(scope["app"]).replicas if state is not None and hasattr(state, "runtime") else None
        if replicas is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await self._request(scope, receive, send, replicas)
        else:
            await self.app(scope, receive, _marking(send, replicas, caller_of(scope), agent_of(scope)))

    async def _request(self, scope: Scope, receive: Receive, send: Send, replicas: ReadReplicas) -> None:
        """A read (`only_reads`, known once routed) whose replica failed before it answered is run again on the
        primary, with the body it was sent; any other request marks its caller as having written."""
        state: dict[str, Any] = scope.setdefault("state", {})
        written = _marking(send, replicas, caller_of(scope), agent_of(scope))
        body: list[Message] = []  # as a read received it, to be given again
        held: list[Message] = []

        async def recording() -> Message:
            message = await receive()
            if message["type"] == "http.request" and only_reads(scope):
                body.append(message)
            return message

        async def answering(message: Message) -> None:
            if not only_reads(scope):
                await written(message)
            elif message["type"] == "http.response.start" and state.get(REPLICA_FAILED):
                held.append(message)
            elif not held:
                await send(message)

        try:
            await self.app(scope, recording, answering)
        except Exception:
            if not state.get(REPLICA_FAILED) or held:
                raise
            held.append({"type": "http.response.start"})  # failed before it answered: as a held 503
        if held:
            state[PRIMARY_ONLY] = True
            state.pop(REPLICA_FAILED)
            await self.app(scope, _replaying(body, _no_body), send)


def _marking(send: Send, replicas: ReadReplicas, caller: bytes | None, agent_id: uuid.UUID | None) -> Send:
    """`send`, noting after each message that the caller has written (a turn streams while it writes)."""

    async def marked(message: Message) -> None:
        await send(message)
        replicas.note_write(caller, agent_id)

    return marked


def _replaying(messages: list[Message], then: Receive) -> Receive:
    """`then`, once `messages` (a body received already) have been given again."""
    pending = list(messages)

    async def receive() -> Message:
        return pending.pop(0) if pending else await then()

    return receive


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}
