"""The reply streamed while the LLM writes it: `message_delta` events over SSE and the WebSocket, one OpenAI chunk per
delta, Letta's `stream_tokens`; replay keeps the final `message`. The scripted LLM streams its answers in pieces
through the real `openai` client, as an endpoint would."""

import json
import threading
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from app.chat.events import Event, MessageDelta, MessageEvent, ReplyPieces
from app.delivery.hub import WatcherQueue
from testkit.scripted_llm import ScriptedLLM, call, cut, paused, tools
from tests.support.chat import chat
from tests.support.letta import letta_sdk, unique
from tests.support.service import openai_client

# The scripted stream's chunks of a send_message call: the role, the call's head, `{"tex`, `t": "`, then the reply.
FIRST_PIECE_SENT = 5


def halted_midway(reply: dict[str, Any], request: pytest.FixtureRequest) -> tuple[dict[str, Any], threading.Event]:
    """The reply, its stream halted after the reply's first piece until the test has seen that piece (`seen.set()`).
    A watcher that reads late gets pieces joined (WatcherQueue): without the halt, how many deltas arrive would
    depend on how loaded the machine is."""
    seen = threading.Event()
    request.addfinalizer(seen.set)  # never leave the scripted LLM waiting
    return paused(reply, after_chunks=FIRST_PIECE_SENT, gate=seen), seen


def sse_events(
    client: TestClient, agent: dict, message: str, seen: threading.Event | None = None, **params: Any
) -> list[dict[str, Any]]:
    """The turn's server-sent events; `seen` is set once the first delta has arrived."""
    with client.stream(
        "POST",
        f"/v1/agents/{agent['id']}/chat",
        params=params,
        json={"message": message},
        headers={"Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200, response.read()
        events = []
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if seen is not None and events[-1]["type"] == "message_delta":
                    seen.set()
        return events


def deltas_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "message_delta"]


def test_sse_streams_the_reply_in_order_and_replay_keeps_the_whole_message(
    client: TestClient, agent: dict, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> None:
    # Quotes, a line break and Japanese in the arguments: escapes and multi-byte text split across chunks.
    reply = 'こんにちは、"Aiko"さん。\nラーメンの話、覚えていますよ。'
    answer, seen = halted_midway(tools(call("send_message", text=reply)), request)
    llm.reset(answer)
    events = sse_events(client, agent, "覚えてる？", seen)
    deltas = deltas_of(events)
    assert len(deltas) > 1, "the reply came whole"
    assert "".join(d["text"] for d in deltas) == reply
    assert {d["call_id"] for d in deltas} == {next(e["call_id"] for e in events if e["type"] == "tool_call")}
    # Every event, live ones included, in seq order; the deltas come before the message they make up.
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})
    types = [e["type"] for e in events]
    assert types.index("message") > max(i for i, t in enumerate(types) if t == "message_delta")
    assert events[-1]["reply"] == reply
    assert llm.requests[0]["stream"] is True and llm.requests[0]["stream_options"] == {"include_usage": True}
    # Replay is the stored events: the deltas were live only.
    replay = client.get(f"/v1/agents/{agent['id']}/turns/{events[0]['turn_id']}").json()["events"]
    assert replay == [e for e in events if e["type"] != "message_delta"]
    assert events[-1]["usage"]["completion_tokens"] == 10  # the stream's own usage chunk


def test_without_a_watcher_of_deltas_the_llm_is_asked_for_whole_answers(
    client: TestClient, agent: dict, llm: ScriptedLLM
) -> None:
    llm.reset(tools(call("send_message", text="whole")), tools(call("send_message", text="whole again")))
    assert chat(client, agent, "hi")["reply"] == "whole"
    events = sse_events(client, agent, "hi", deltas=False)
    assert not deltas_of(events) and events[-1]["reply"] == "whole again"
    assert [r.get("stream") for r in llm.requests] == [None, None]


def test_a_stream_that_breaks_off_ends_the_turn_as_an_llm_failure(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    unfinished = "This reply will never be finished, alas."
    llm.reset(cut(tools(call("send_message", text=unfinished)), after_chunks=5))
    events = sse_events(client, agent, "tell me a long story")
    # The pieces already written went out (provisional), then the failure as today: no message, llm_error.
    shown = "".join(d["text"] for d in deltas_of(events))
    assert shown and unfinished.startswith(shown) and len(shown) < len(unfinished)
    assert "message" not in [e["type"] for e in events]
    assert [e["code"] for e in events if e["type"] == "error"] == ["llm_error"]
    assert events[-1]["type"] == "turn_completed" and events[-1]["stop_reason"] == "llm_error"
    stored = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert [m["content"] for m in stored if m["role"] == "user"] == ["tell me a long story"]


def test_the_websocket_streams_deltas_unless_asked_not_to(
    client: TestClient, agent: dict, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> None:
    answer, seen = halted_midway(tools(call("send_message", text="Hello from the socket!")), request)

    def watched(url: str) -> list[dict[str, Any]]:
        with client.websocket_connect(url) as ws:
            ws.send_json({"type": "chat", "message": "hello"})
            events = [ws.receive_json()]
            while events[-1]["type"] != "turn_completed":
                events.append(ws.receive_json())
                if events[-1]["type"] == "message_delta":
                    seen.set()
        return events

    llm.reset(answer, tools(call("send_message", text="Quiet one")))
    streamed = watched(f"/v1/agents/{agent['id']}/ws")
    assert "".join(d["text"] for d in deltas_of(streamed)) == "Hello from the socket!" and len(deltas_of(streamed)) > 1
    quiet = watched(f"/v1/agents/{agent['id']}/ws?deltas=false")
    assert not deltas_of(quiet) and quiet[-1]["reply"] == "Quiet one"
    assert llm.requests[1].get("stream") is None


def test_openai_stream_sends_a_chunk_per_delta(
    client: TestClient, agent: dict, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> None:
    calls = tools(call("send_message", text="First, the news."), call("send_message", text="Then the weather."))
    answer, seen = halted_midway(calls, request)
    llm.reset(answer)
    stream = openai_client(client).chat.completions.create(
        model=agent["id"], messages=[{"role": "user", "content": "news?"}], stream=True
    )
    pieces = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
            seen.set()
    assert len(pieces) > 2
    assert "".join(pieces) == "First, the news.\n\nThen the weather."
    assert llm.requests[0]["stream"] is True


def test_letta_stream_tokens_sends_the_reply_in_pieces_under_one_id(
    client: TestClient, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("tokens"), memory_blocks=[])
    reply = "トークンごとに届きます。Token by token."
    answer, seen = halted_midway(tools(call("send_message", text=reply)), request)
    llm.reset(answer, tools(call("send_message", text=reply)))
    items = []
    with sdk.agents.messages.stream(
        agent_id=agent.id, messages=[{"role": "user", "content": "hi"}], stream_tokens=True
    ) as stream:
        for item in stream:
            items.append(item)
            if item.message_type == "assistant_message":
                seen.set()
    pieces = [i for i in items if i.message_type == "assistant_message"]
    assert len(pieces) > 1 and len({p.id for p in pieces}) == 1
    assert "".join(str(p.content) for p in pieces) == reply
    assert [i.message_type for i in items][-2:] == ["stop_reason", "usage_statistics"]
    with sdk.agents.messages.stream(agent_id=agent.id, messages=[{"role": "user", "content": "again"}]) as stream:
        whole = [i for i in stream if i.message_type == "assistant_message"]
    assert [str(p.content) for p in whole] == [reply]


def test_reply_pieces_show_only_what_the_deltas_did_not(agent: dict) -> None:
    ids = {"agent_id": agent["id"], "turn_id": "00000000-0000-0000-0000-000000000001"}
    pieces = ReplyPieces()
    assert pieces.piece(MessageDelta(**ids, seq=1, step=1, call_id="a", text="Hel")) == (True, "Hel")
    assert pieces.piece(MessageDelta(**ids, seq=2, step=1, call_id="a", text="lo")) == (False, "lo")
    assert pieces.piece(MessageEvent(**ids, seq=5, step=1, text="Hello, world")) == (False, ", world")
    assert pieces.piece(MessageEvent(**ids, seq=6, step=2, text="Not streamed")) == (True, "Not streamed")
    pieces.piece(MessageDelta(**ids, seq=7, step=3, call_id="b", text="Draft"))
    assert pieces.piece(MessageEvent(**ids, seq=8, step=3, text="Other")) == (False, "")  # cannot be taken back


def test_a_slow_watcher_gets_the_deltas_joined(agent: dict) -> None:
    ids = {"agent_id": agent["id"], "turn_id": "00000000-0000-0000-0000-000000000001"}
    queue = WatcherQueue()
    for seq, (call_id, text) in enumerate([("a", "One "), ("a", "two "), ("a", "three"), ("b", "Next")]):
        queue.put_nowait(MessageDelta(**ids, seq=seq, step=1, call_id=call_id, text=text))
    queue.put_nowait(MessageEvent(**ids, seq=4, step=1, text="One two three"))
    waiting = cast(list[Event], [queue.get_nowait() for _ in range(queue.qsize())])  # no None: nothing closed it
    assert [(e.type, getattr(e, "text", None), e.seq) for e in waiting] == [
        ("message_delta", "One two three", 2),
        ("message_delta", "Next", 3),
        ("message", "One two three", 4),
    ]
