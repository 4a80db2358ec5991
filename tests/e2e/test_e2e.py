"""`engram serve` as a real process: the Japanese story over HTTP and WebSocket, across a process restart."""

import json
import uuid

import httpx
from pgserver.postgres_server import PostgresServer
from websockets.sync.client import connect

from testkit.scripted_llm import ScriptedLLM, call, last_tool_result, tools
from testkit.service_process import running_service
from tests.support.chat import TOOL_THEN_REPLY
from tests.support.database import create_database


def chat_watched(base: str, agent_id: str, message: str) -> tuple[dict, list[dict]]:
    """POST a chat while a WebSocket watches; returns the response and what the socket saw (the reply's deltas
    among it, checked here: they make up the reply, and the rest is what the response holds)."""
    with connect(base.replace("http", "ws") + f"/v1/agents/{agent_id}/ws") as ws:
        response = httpx.post(f"{base}/v1/agents/{agent_id}/chat", json={"message": message}, timeout=60)
        assert response.status_code == 200, response.text
        seen: list[dict] = []
        while not seen or seen[-1]["type"] != "turn_completed":
            seen.append(json.loads(ws.recv(timeout=10)))
    turn = response.json()
    assert "".join(e["text"] for e in seen if e["type"] == "message_delta") == turn["reply"]
    return turn, [e for e in seen if e["type"] != "message_delta"]


def test_story_against_the_running_service(postgres_server: PostgresServer, llm: ScriptedLLM) -> None:
    database = create_database(postgres_server, f"engram_e2e_{uuid.uuid4().hex[:8]}")
    env = {
        "DATABASE_URL": database,
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "test",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_LLM_MAX_RETRIES": "0",
    }
    with running_service(env) as base:
        agent = httpx.post(f"{base}/v1/agents", json={"name": "アシスタント"}).json()
        llm.reset(
            tools(call("core_memory_append", label="human", content="名前: 太郎"), content="名前を覚える。"),
            tools(call("send_message", text="よろしく、太郎さん！")),
            tools(call("archival_memory_create", content="太郎の好きな食べ物はラーメン")),
            tools(call("send_message", text="ラーメン、いいですね！")),
        )
        turn, seen = chat_watched(base, agent["id"], "僕の名前は太郎です。")
        assert seen == turn["events"]
        assert [e["type"] for e in seen] == TOOL_THEN_REPLY
        chat_watched(base, agent["id"], "ラーメンが大好きです。")

    with running_service(env) as base:  # a new process on the same database
        memory = httpx.get(f"{base}/v1/agents/{agent['id']}/memory").json()
        assert "名前: 太郎" in {b["label"]: b["value"] for b in memory["blocks"]}["human"]
        llm.reset(
            tools(call("archival_memory_search", query="好きな食べ物")),
            lambda request: tools(
                call("send_message", text="ラーメンです！" if "ラーメン" in last_tool_result(request) else "?")
            ),
        )
        turn, _ = chat_watched(base, agent["id"], "僕の好きな食べ物は何だっけ？")
        assert turn["reply"] == "ラーメンです！"
        search_result = next(e for e in turn["events"] if e["type"] == "tool_result")
        assert "太郎の好きな食べ物はラーメン" in search_result["result"]
