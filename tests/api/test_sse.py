"""The one SSE encoder every streaming surface uses: a turn that fails after its stream began ends with the
surface's own error frame (then the closing frame), and is logged unless it is one of Engram's errors."""

import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from app.api import sse
from app.errors import TurnStopped


def _failure(exc: Exception) -> bytes:
    return sse.frame(type(exc).__name__, event="error")


async def _body(failing_with: Exception) -> list[bytes]:
    async def frames() -> AsyncIterator[bytes]:
        yield sse.frame('{"n": 1}', event="step")
        raise failing_with

    response = sse.event_stream(frames(), _failure, about="turn T of agent A", last=sse.DONE)
    assert response.media_type == sse.MEDIA_TYPE and response.headers["cache-control"] == "no-cache"
    return [bytes(chunk) if not isinstance(chunk, str) else chunk.encode() async for chunk in response.body_iterator]


async def test_an_unexpected_failure_mid_stream_is_logged_and_ends_the_stream_in_the_surfaces_shape(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="engram.sse"):
        body = await _body(RuntimeError("boom"))
    assert body == [b'event: step\ndata: {"n": 1}\n\n', b"event: error\ndata: RuntimeError\n\n", b"data: [DONE]\n\n"]
    [record] = [r for r in caplog.records if r.name == "engram.sse"]
    assert record.getMessage() == "turn T of agent A failed mid-stream" and record.exc_info is not None


async def test_an_engram_error_mid_stream_says_itself_what_happened_and_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="engram.sse"):
        body = await _body(TurnStopped(uuid.uuid4()))
    assert body[1:] == [b"event: error\ndata: TurnStopped\n\n", b"data: [DONE]\n\n"]
    assert not [r for r in caplog.records if r.name == "engram.sse"]
