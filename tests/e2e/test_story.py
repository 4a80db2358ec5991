"""The prototype's story in Japanese, in-process: name → core memory, preference → archival memory, a restart,
the preference found again by an archival search, a name change that rewrites core memory and keeps history."""

from typing import Any

from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, last_tool_result, tools
from tests.support.chat import TOOL_THEN_REPLY, block_value, chat, event_types
from tests.support.service import checked_client


def answer_from_search(request: dict) -> dict:
    found = last_tool_result(request)
    food = "ラーメン" if "ラーメン" in found else "わかりません"
    return tools(call("send_message", text=f"太郎さんの好きな食べ物は{food}ですね！"))


def test_japanese_story_survives_a_restart(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    with checked_client(create_app(settings, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "アシスタント"}).json()
        llm.reset(
            tools(call("core_memory_append", label="human", content="名前: 太郎"), content="名前を覚えておこう。"),
            tools(call("send_message", text="よろしくお願いします、太郎さん！")),
        )
        first = chat(client, agent, "僕の名前は太郎です。")
        assert first["reply"] == "よろしくお願いします、太郎さん！"
        assert "名前: 太郎" in block_value(client, agent, "human")

        llm.reset(
            tools(call("archival_memory_create", content="太郎の好きな食べ物はラーメン", tags=["食べ物"])),
            tools(call("send_message", text="ラーメン、いいですね！")),
        )
        chat(client, agent, "ラーメンが大好きです。")
        stored = client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]
        assert [p["content"] for p in stored] == ["太郎の好きな食べ物はラーメン"]

    with checked_client(create_app(settings, embedder=embedder)) as client:  # a new process would see the same
        llm.reset(tools(call("archival_memory_search", query="好きな食べ物")), answer_from_search)
        recalled = chat(client, agent, "僕の好きな食べ物は何だっけ？")
        assert recalled["reply"] == "太郎さんの好きな食べ物はラーメンですね！"
        assert "名前: 太郎" in llm.requests[0]["messages"][0]["content"]  # core memory is in the new process's prompt

        llm.reset(
            tools(call("core_memory_replace", label="human", old="太郎", new="次郎")),
            tools(call("send_message", text="これからは次郎さんですね。")),
        )
        renamed = chat(client, agent, "実は名前を変えました。今は次郎です。")
        assert event_types(renamed)[-2:] == ["message", "turn_completed"]
        assert block_value(client, agent, "human") == "名前: 次郎"
        history = client.get(f"/v1/agents/{agent['id']}/memory/human/history").json()["items"]
        assert [(h["value"], h["source"]) for h in history] == [("名前: 次郎", "agent"), ("名前: 太郎", "agent"), ("", "api")]
        assert history[0]["turn_id"] == renamed["turn_id"] and history[1]["turn_id"] == first["turn_id"]


def test_websocket_streams_events_in_order(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        tools(call("archival_memory_create", content="WebSocket fan"), content="Save it."),
        tools(call("send_message", text="Got it")),
        tools(call("send_message", text="Second turn via POST")),
    )
    with client.websocket_connect(f"/v1/agents/{agent['id']}/ws") as ws:
        ws.send_json({"type": "chat", "message": "I like WebSockets"})
        live: list[dict[str, Any]] = []
        while not live or live[-1]["type"] != "turn_completed":
            live.append(ws.receive_json())
        events = [e for e in live if e["type"] != "message_delta"]  # the reply as it was written: live only
        assert [e["type"] for e in events] == TOOL_THEN_REPLY
        assert "".join(e["text"] for e in live if e["type"] == "message_delta") == "Got it"
        # every event in order, deltas included; deltas a slower reader found still queued are joined into one
        # that keeps the later seq (delivery/hub.py WatcherQueue): a gap only ever before a delta
        assert live[0]["seq"] == 0
        for before, event in zip(live, live[1:], strict=False):
            assert event["seq"] == before["seq"] + 1 or (event["seq"] > before["seq"] and event["type"] == "message_delta")
        replay = client.get(f"/v1/agents/{agent['id']}/turns/{events[0]['turn_id']}").json()
        assert replay["events"] == events

        posted = chat(client, agent, "and over HTTP")  # a turn started elsewhere reaches this socket too
        watched = [ws.receive_json()]
        while watched[-1]["type"] != "turn_completed":
            watched.append(ws.receive_json())
        assert [e for e in watched if e["type"] != "message_delta"] == posted["events"]

        ws.send_text("not json")
        problem = ws.receive_json()
        assert problem["type"] == "error" and problem["code"] == "invalid_request"


def test_websocket_for_unknown_agent_is_closed(client: TestClient) -> None:
    with client.websocket_connect("/v1/agents/00000000-0000-0000-0000-000000000000/ws") as ws:
        message = ws.receive_json()
        assert message["type"] == "error" and message["code"] == "not_found"
