"""429 and 503 tried again after the answer's Retry-After (a stub answers them: the served Engram gives neither on
demand), up to `max_retries`, and never past `max_retry_wait`; and a chat turn whose answer was lost on the way
(the served Engram ran it; a transport in front of it answers 503 instead) retried with the same Idempotency-Key
and run once."""

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from engram_client import Agent, AsyncEngram, Engram, RateLimited, ServiceUnavailable

from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.clients.python.conftest import Statuses
from tests.support.served import Served

AGENT: dict[str, Any] = {
    "id": str(uuid.uuid4()),
    "name": "stub",
    "system": None,
    "model": None,
    "created_at": "2024-05-01T00:00:00Z",
    "updated_at": "2024-05-01T00:00:00Z",
    "blocks": [],
}


class Stub:
    """Answers each request with the next of `answers` (the last one again once they run out), noting when."""

    def __init__(self, *answers: Callable[[], httpx.Response]) -> None:
        self.answers = list(answers)
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.times.append(time.monotonic())
        return self.answers.pop(0)() if len(self.answers) > 1 else self.answers[0]()

    def waits(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.times, self.times[1:], strict=False)]


def refused(status: int, retry_after: str | None) -> Callable[[], httpx.Response]:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return lambda: httpx.Response(status, headers=headers, json={"error": "quota_exceeded", "detail": "slow down"})


def agent() -> httpx.Response:
    return httpx.Response(200, json=AGENT)


def stubbed(stub: Stub, max_retries: int = 3) -> Engram:
    return Engram("http://stub", max_retries=max_retries, http_client=httpx.Client(transport=httpx.MockTransport(stub)))


def test_a_429_is_tried_again_after_its_retry_after() -> None:
    stub = Stub(refused(429, "1"), agent)
    assert stubbed(stub).agents.get(AGENT["id"]).name == "stub"
    [wait] = stub.waits()
    assert 1.0 <= wait < 1.5


def test_a_retry_after_given_as_a_date_is_honoured() -> None:
    stub = Stub(lambda: refused(503, format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True))(), agent)
    assert stubbed(stub).agents.get(AGENT["id"]).name == "stub"
    [wait] = stub.waits()
    assert 0.9 <= wait < 2.5  # the date has whole seconds


async def test_the_async_client_waits_as_long() -> None:
    stub = Stub(refused(503, "1"), agent)
    async with AsyncEngram("http://stub", http_client=httpx.AsyncClient(transport=httpx.MockTransport(stub))) as engram:
        assert (await engram.agents.get(AGENT["id"])).name == "stub"
    [wait] = stub.waits()
    assert 1.0 <= wait < 1.5


def test_the_retries_stop_at_max_retries_with_the_last_answer_raised() -> None:
    stub = Stub(refused(503, "0"))
    with pytest.raises(ServiceUnavailable) as unavailable:
        stubbed(stub, max_retries=2).agents.get(AGENT["id"])
    assert len(stub.times) == 3 and unavailable.value.retry_after == 0
    stub = Stub(refused(503, "0"))
    with pytest.raises(ServiceUnavailable):
        stubbed(stub, max_retries=0).agents.get(AGENT["id"])
    assert len(stub.times) == 1


def test_a_wait_longer_than_max_retry_wait_is_not_waited_for() -> None:
    stub = Stub(refused(429, "3600"), agent)
    started = time.monotonic()
    with pytest.raises(RateLimited) as limited:
        stubbed(stub).agents.get(AGENT["id"])  # max_retry_wait: 60 s by default
    assert limited.value.retry_after == 3600 and len(stub.times) == 1 and time.monotonic() - started < 0.5


def test_a_503_that_is_not_engrams_is_tried_again_after_a_backoff() -> None:
    stub = Stub(lambda: httpx.Response(503, text="<html>Bad gateway</html>"), agent)  # a proxy's: no Retry-After
    assert stubbed(stub).agents.get(AGENT["id"]).name == "stub"
    [wait] = stub.waits()
    assert 0.25 <= wait < 1.0  # the first backoff, 0.5 s, jittered down to half


class LosesFirstChatAnswer(httpx.BaseTransport):
    """In front of the served Engram: every request reaches it, but the answer to the first chat is lost and a 503
    comes back instead, as from a proxy whose upstream connection broke after the turn had run."""

    def __init__(self) -> None:
        self.upstream = httpx.HTTPTransport()
        self.chat_keys: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.upstream.handle_request(request)
        if request.url.path.endswith("/chat"):
            self.chat_keys.append(request.headers["Idempotency-Key"])
            if len(self.chat_keys) == 1:
                response.read()
                response.close()
                return httpx.Response(503, headers={"Retry-After": "0"}, json={"error": "bad_gateway", "detail": "lost"})
        return response


def test_a_chat_retried_after_a_lost_answer_carries_its_key_and_runs_once(
    service: Served, agent: Agent, llm: ScriptedLLM, statuses: Statuses
) -> None:
    llm.reset(tools(call("send_message", text="Hello once.")))  # a second turn would find no reply: a 502
    transport = LosesFirstChatAnswer()
    with Engram(service.url, http_client=httpx.Client(transport=transport, timeout=30)) as engram:
        turn = engram.chat(agent.id, "Hello?")
        assert turn.reply == "Hello once." and len(transport.chat_keys) == 2
        assert transport.chat_keys[0] == transport.chat_keys[1] and len(transport.chat_keys[0]) == 32
        assert len(llm.requests) == 1  # one turn's one LLM call
        assert [m.content for m in engram.messages.list(agent.id).items if m.role == "user"] == ["Hello?"]
        # A key of the caller's is sent as given: the same key again is the same turn, not a new one.
        again = engram.chat(agent.id, "Hello?", idempotency_key=transport.chat_keys[0])
        assert again.turn_id == turn.turn_id and len(llm.requests) == 1
