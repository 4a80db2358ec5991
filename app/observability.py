"""Request ids, JSON access logs, the request-body cap, and JSON log formatting."""

import json
import logging
import re
import time
import uuid
from contextvars import ContextVar
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import HTTP_REQUESTS

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
access_log = logging.getLogger("engram.access")
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if request_id := request_id_var.get():
            entry["request_id"] = request_id
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class RequestContextMiddleware:
    """Gives every request an id (X-Request-ID, echoed back), caps request bodies, logs and counts requests.
    `bulk`: the paths whose POST bodies may be larger (bulk imports), and their cap."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, bulk: tuple[re.Pattern[str], int] | None = None):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.bulk = bulk

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        offered = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = offered if _SAFE_ID.match(offered) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 0
        cap = self.max_body_bytes
        if self.bulk and scope["type"] == "http" and scope["method"] == "POST" and self.bulk[0].match(scope["path"]):
            cap = self.bulk[1]
        try:
            received = 0
            declared = int(headers[b"content-length"]) if headers.get(b"content-length", b"").isdigit() else 0

            async def capped_receive() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    # Declared or streamed, a body over the cap is refused as soon as it is known to be one.
                    if received > cap or declared > cap:
                        # FastAPI turns other errors raised while reading a body into a 400; an HTTPException passes.
                        raise HTTPException(413, f"request bodies are limited to {cap} bytes")
                return message

            async def send_with_id(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    message.setdefault("headers", [])
                    message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
                await send(message)

            await self.app(scope, capped_receive if scope["type"] == "http" else receive, send_with_id)
        finally:
            if scope["type"] == "http":
                route = scope.get("route")
                path = getattr(route, "path", None) or "unmatched"
                HTTP_REQUESTS.labels(scope["method"], path, str(status)).inc()
                access_log.info(
                    "%s %s %s",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "fields": {
                            "method": scope["method"],
                            "path": scope["path"],
                            "status": status,
                            "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                        }
                    },
                )
            request_id_var.reset(token)
