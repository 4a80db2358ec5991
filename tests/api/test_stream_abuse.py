"""The streaming surfaces under abuse, against the app served for real by uvicorn (real TCP buffers, the same
WebSocket protocol as `engram serve`) with the scripted LLM: bad frames, clients that vanish mid-turn, many idle
sockets, a reader that never reads. Whatever a client does, the server logs no error, answers a typed error event
or a close code, leaves no task or database connection behind, and a turn once started completes and is stored."""

import asyncio
import base64
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect as connect_async
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from app.chat.events import event_adapter
from app.llm.embeddings import Embedder
from app.runtime import runtime
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.served import Served
from tests.support.service import scripted_settings

SEND_TIMEOUT_SECONDS = 1.0


@pytest.fixture(scope="module")
def service(database_url: str, llm: ScriptedLLM, embedder: Embedder) -> Iterator[Served]:
    # A context window large enough that long replies never make a turn summarise (which would take scripted replies).
    settings = scripted_settings(
        database_url,
        llm,
        llm_timeout_seconds=60,
        context_window_tokens=1_000_000,
        ws_send_timeout_seconds=SEND_TIMEOUT_SECONDS,
    )
    with Served(settings, embedder) as served:
        yield served


@pytest.fixture
def api(service: Served) -> Iterator[httpx.Client]:
    statuses: list[int] = []
    with httpx.Client(
        base_url=service.url, timeout=60, event_hooks={"response": [lambda response: statuses.append(response.status_code)]}
    ) as client:
        yield client
    assert 500 not in statuses


@pytest.fixture
def agent(api: httpx.Client) -> dict[str, Any]:
    response = api.post("/v1/agents", json={"name": f"abused {os.urandom(4).hex()}"})
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture(autouse=True)
def leaves_nothing_behind(service: Served, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Each test: no error (or unretrieved exception) logged by the server, and once its clients are gone, the server
    has as many tasks and checked-out database connections as before it."""
    llm.reset()
    tasks, connections = service.tasks(), service.connections_checked_out()
    yield
    settle(lambda: (service.tasks(), service.connections_checked_out()) <= (tasks, connections))
    assert service.tasks() <= tasks, "asyncio tasks left behind"
    assert service.connections_checked_out() <= connections, "database connections left checked out"
    records = caplog.get_records("setup") + caplog.get_records("call") + caplog.records
    errors = [record for record in records if record.levelno >= logging.ERROR]
    assert not errors, [record.getMessage() for record in errors]


def settle(done: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def held(llm: ScriptedLLM, request: pytest.FixtureRequest) -> threading.Event:
    """Scripts one turn whose LLM call waits until the test sets the event; the reply is "done after all"."""
    release = threading.Event()
    request.addfinalizer(release.set)  # never leave the scripted LLM waiting

    def held_reply(_: dict[str, Any]) -> dict[str, Any]:
        release.wait(timeout=30)
        return tools(call("send_message", text="done after all"))

    llm.reset(held_reply)
    return release


def socket_url(service: Served, agent: dict[str, Any]) -> str:
    return f"{service.ws_url}/v1/agents/{agent['id']}/ws"


def next_event(ws: ClientConnection) -> dict[str, Any]:
    event = json.loads(ws.recv(timeout=10))
    event_adapter.validate_python(event)  # every frame is one of the typed events
    return event


def until_completed(ws: ClientConnection) -> list[dict[str, Any]]:
    events = [next_event(ws)]
    while events[-1]["type"] != "turn_completed":
        events.append(next_event(ws))
    return events


def close_code(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=10)
    return closed.value.rcvd.code if closed.value.rcvd else None


def stored_turn(api: httpx.Client, agent: dict[str, Any], turn_id: str) -> dict[str, Any]:
    """The turn once it has finished, as replay and recall memory have it."""
    path = f"/v1/agents/{agent['id']}/turns/{turn_id}"
    settle(lambda: api.get(path).json()["status"] != "running")
    turn = api.get(path).json()
    messages = api.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    turn["messages"] = [m for m in messages if m["turn_id"] == turn_id]
    return turn


def assert_stored(turn: dict[str, Any], message: str, reply: str) -> None:
    assert (turn["status"], turn["stop_reason"], turn["reply"]) == ("completed", "end_turn", reply)
    said = [m for m in turn["messages"] if m["role"] == "user"]
    assert [m["content"] for m in said] == [message]
    assert any(reply in json.dumps(m["tool_calls"]) for m in turn["messages"] if m["role"] == "assistant" and m["tool_calls"])


def test_malformed_json_and_unknown_types_answer_error_events_on_a_socket_that_keeps_working(
    service: Served, agent: dict[str, Any], llm: ScriptedLLM
) -> None:
    llm.reset(tools(call("send_message", text="still here")))
    with connect(socket_url(service, agent)) as ws:
        for frame, says in [
            ("{not json", "not valid JSON"),
            ("[1, 2]", "a JSON object"),
            ('{"type": "subscribe", "topic": "x"}', "unknown message type 'subscribe'"),
            ('{"message": "no type"}', 'has no "type"'),
            ('{"type": "chat"}', "message"),
            ('{"type": "chat", "message": 7}', "message"),
        ]:
            ws.send(frame)
            error = next_event(ws)
            assert (error["type"], error["code"], error["turn_id"]) == ("error", "invalid_request", None), frame
            assert says in error["detail"] and '{"type": "chat", "message": ...}' in error["detail"], error
        ws.send(json.dumps({"type": "chat", "message": "are you still there?"}))
        events = until_completed(ws)
    assert events[-1]["reply"] == "still here"


def test_a_binary_frame_is_closed_with_1003(service: Served, agent: dict[str, Any], api: httpx.Client) -> None:
    with connect(socket_url(service, agent)) as ws:
        ws.send(json.dumps({"type": "chat", "message": "hi"}).encode())
        assert close_code(ws) == 1003
        assert "text" in (ws.close_reason or "")
    assert api.get(f"/v1/agents/{agent['id']}/messages").json()["items"] == []  # nothing was run


def test_a_10_mb_frame_is_closed_with_1009(service: Served, agent: dict[str, Any], api: httpx.Client) -> None:
    with connect(socket_url(service, agent), max_size=None) as ws:
        ws.send(json.dumps({"type": "chat", "message": "x" * 10_000_000}))
        assert close_code(ws) == 1009
        assert "ENGRAM_MAX_REQUEST_BYTES" in (ws.close_reason or "")
    assert api.get(f"/v1/agents/{agent['id']}/messages").json()["items"] == []


def test_closing_the_socket_mid_turn_lets_the_turn_complete_and_be_stored(
    service: Served, agent: dict[str, Any], api: httpx.Client, held: threading.Event
) -> None:
    with connect(socket_url(service, agent)) as ws:
        ws.send(json.dumps({"type": "chat", "message": "remember me"}))
        started = next_event(ws)
    assert started["type"] == "turn_started"
    held.set()
    assert_stored(stored_turn(api, agent, started["turn_id"]), "remember me", "done after all")


@pytest.mark.parametrize("route", ["chat", "openai"])
def test_an_sse_client_gone_mid_turn_lets_the_turn_complete_and_be_stored(
    service: Served, agent: dict[str, Any], api: httpx.Client, held: threading.Event, route: str
) -> None:
    if route == "chat":
        request = api.build_request(
            "POST",
            f"/v1/agents/{agent['id']}/chat",
            json={"message": "remember me"},
            headers={"Accept": "text/event-stream"},
        )
    else:
        body = {"model": agent["id"], "messages": [{"role": "user", "content": "remember me"}], "stream": True}
        request = api.build_request("POST", "/v1/chat/completions", json=body)
    response = api.send(request, stream=True)
    assert response.status_code == 200
    first = next(line for line in response.iter_lines() if line.startswith("data: "))
    response.close()  # gone while the LLM is still thinking
    held.set()
    if route == "chat":
        turn_id = json.loads(first[6:])["turn_id"]
    else:
        turn_id = str(uuid.UUID(hex=json.loads(first[6:])["id"].removeprefix("chatcmpl-")))
    assert_stored(stored_turn(api, agent, turn_id), "remember me", "done after all")


def test_two_hundred_idle_sockets_hold_no_database_connection_and_all_see_a_turn(
    service: Served, agent: dict[str, Any], api: httpx.Client, llm: ScriptedLLM
) -> None:
    llm.reset(tools(call("send_message", text="hello, all of you")))
    connections = service.connections_checked_out()

    async def crowd() -> list[list[dict[str, Any]]]:
        sockets = [await connect_async(socket_url(service, agent)) for _ in range(200)]
        try:
            # Each socket checked its agent in a short session of its own, now closed.
            await asyncio.to_thread(settle, lambda: service.connections_checked_out() <= connections)
            held_connections = service.connections_checked_out()
            turn = await asyncio.to_thread(api.post, f"/v1/agents/{agent['id']}/chat", json={"message": "hi"})
            assert turn.status_code == 200, turn.text
            seen = await asyncio.gather(*(watched_turn(ws) for ws in sockets))
        finally:
            await asyncio.gather(*(ws.close() for ws in sockets))
        assert held_connections <= connections
        return seen

    async def watched_turn(ws: Any) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        while not events or events[-1]["type"] != "turn_completed":
            events.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        return events

    seen = asyncio.run(crowd())
    for events in seen:  # each socket saw the reply grow, then the turn's stored events
        assert [e["type"] for e in events if e["type"] != "message_delta"] == [
            "turn_started",
            "tool_call",
            "tool_result",
            "message",
            "turn_completed",
        ]
        assert "".join(e["text"] for e in events if e["type"] == "message_delta") == "hello, all of you"


def open_never_reading_socket(service: Served, agent: dict[str, Any]) -> socket.socket:
    """A WebSocket client with a tiny receive buffer that completes the handshake and then never reads again."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = service.ws_url.removeprefix("ws://").split(":")
    raw.connect((host, int(port)))
    key = base64.b64encode(os.urandom(16)).decode()
    raw.sendall(
        f"GET /v1/agents/{agent['id']}/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += raw.recv(1)
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return raw


def test_a_reader_that_never_reads_is_dropped_without_holding_up_other_clients(
    service: Served, agent: dict[str, Any], api: httpx.Client, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    # Each turn's events carry ~2.5 MB (a step of 30 long messages): three turns overflow the socket buffers (4 MB at most).
    turns, big = 3, " ".join(["memory"] * 4_000)
    llm.reset(*[tools(*[call("send_message", text=big) for _ in range(30)]) for _ in range(turns)])
    stuck = open_never_reading_socket(service, agent)
    try:
        with connect(socket_url(service, agent), max_size=None) as watcher:
            for _ in range(turns):
                started = time.monotonic()
                assert api.post(f"/v1/agents/{agent['id']}/chat", json={"message": "go on"}).status_code == 200
                assert time.monotonic() - started < 10
                assert until_completed(watcher)[-1]["reply"] == "\n\n".join([big] * 30)
        # The stuck reader is let go within its send timeout, though its TCP connection is still open.
        hub = runtime(service.app).turn_streams.hub
        settle(lambda: not hub.watching(uuid.UUID(agent["id"])), SEND_TIMEOUT_SECONDS + 5)
        assert not hub.watching(uuid.UUID(agent["id"]))
        assert any("took no event for 1s" in record.getMessage() for record in caplog.records)
    finally:
        stuck.close()
