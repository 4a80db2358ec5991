"""Shutting down within a grace period without losing work.

On SIGTERM (or the first Ctrl-C) the service drains: for the notice period readiness fails and new requests are
refused with 503 + Retry-After while the listener stays open (a load balancer sees the replica leave instead of
meeting refused connections); then uvicorn stops accepting, closes idle connections and waits for requests in
flight; then the lifespan lets turns in flight finish and abandons what the periodic sweep redoes (message
vectors). Each stage takes what is left of one budget, `ENGRAM_SHUTDOWN_GRACE_SECONDS`, so the process exits
within it — before an orchestrator's SIGKILL."""

import time

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import shaped_response

RETRY_AFTER_SECONDS = 2  # another replica, or this one restarted, is a moment away
# What the lifespan needs after the last turn: cancelling leftovers, closing the pool, stopping an embedded server.
LIFESPAN_RESERVE_SECONDS = 2.0
# Answered while draining: liveness, readiness (which says so) and metrics.
ALWAYS_ANSWERED = ("/healthz", "/readyz", "/metrics")


class Drain:
    def __init__(self, grace_seconds: float, notice_seconds: float):
        self.grace_seconds = grace_seconds
        self.notice_seconds = min(notice_seconds, grace_seconds / 2)
        self._began: float | None = None

    def begin(self) -> None:
        if self._began is None:
            self._began = time.monotonic()

    @property
    def active(self) -> bool:
        return self._began is not None

    def notice_over(self) -> bool:
        return self._began is not None and time.monotonic() - self._began >= self.notice_seconds

    def remaining(self) -> float:
        """Seconds left of the grace period (all of it while not draining: a shut-down without a signal)."""
        if self._began is None:
            return self.grace_seconds
        return max(self.grace_seconds - (time.monotonic() - self._began), 0.0)

    @property
    def requests_timeout(self) -> float:
        """How long the server waits for requests in flight once the notice is over."""
        return max(self.grace_seconds - self.notice_seconds - LIFESPAN_RESERVE_SECONDS, 1.0)


class DrainGate:
    """Refuses new HTTP requests (503 + Retry-After) and WebSocket connections (closed with 1012, "service
    restart") while the service drains; what is already running is not touched."""

    def __init__(self, app: ASGIApp, *, drain: Drain):
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.drain.active or scope["type"] not in ("http", "websocket") or scope["path"] in ALWAYS_ANSWERED:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": 1012, "reason": "shutting down; reconnect shortly"})
            return
        body = {"error": "shutting_down", "detail": "this replica is shutting down; retry shortly"}
        response = shaped_response(scope["path"], 503, body, {"Retry-After": str(RETRY_AFTER_SECONDS)})
        await response(scope, receive, send)
