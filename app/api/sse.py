"""Server-sent events: the one way a route streams (Engram's chat, Letta's messages, OpenAI's chat completions).

A surface writes a turn's events as frames of its own shape (`frame`: its data serialised as its clients read it,
encoded by FastAPI's SSE encoder); `event_stream` sends them and ends every stream the same way when the turn fails
after the first frame went out. The status line has gone by then, so the failure becomes the surface's own error
frame, and it is logged unless it is one of Engram's errors, which say themselves what happened."""

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.sse import EventSourceResponse, format_sse_event

from app.errors import EngramError

log = logging.getLogger("engram.sse")

MEDIA_TYPE = "text/event-stream"
# A streaming route's 200 as OpenAPI documents it, beside its JSON answer.
OPENAPI_CONTENT: dict[str, Any] = {MEDIA_TYPE: {"schema": {"type": "string"}}}


def frame(data: str, *, event: str | None = None) -> bytes:
    return format_sse_event(data_str=data, event=event)


DONE = frame("[DONE]")  # how OpenAI's streams end, and Letta's after them


def accepts_events(request: Request) -> bool:
    return MEDIA_TYPE in request.headers.get("accept", "")


def event_stream(
    frames: AsyncIterator[bytes], failure: Callable[[Exception], bytes], *, about: str, last: bytes | None = None
) -> EventSourceResponse:
    """The frames as a response; `failure` is the surface's frame for a turn that failed mid-stream, `about` names
    that turn in the log, `last` closes the stream whether the turn ended or failed."""
    return EventSourceResponse(_ended(frames, failure, about, last), headers={"Cache-Control": "no-cache"})


async def _ended(
    frames: AsyncIterator[bytes], failure: Callable[[Exception], bytes], about: str, last: bytes | None
) -> AsyncIterator[bytes]:
    try:
        async for encoded in frames:
            yield encoded
    except Exception as exc:  # the turn's task failed after the stream had started
        if not isinstance(exc, EngramError):
            log.exception("%s failed mid-stream", about)
        yield failure(exc)
    if last is not None:
        yield last
