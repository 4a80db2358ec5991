import time
from typing import Any

from fastapi.testclient import TestClient

from testkit.scripted_llm import call, tools
from tests.support.database import run_sql
from tests.support.service import ApiClient

# The events of a turn whose first step reasons and calls a tool, and whose second replies.
TOOL_THEN_REPLY = [
    "turn_started",
    "reasoning",
    "tool_call",
    "tool_result",
    "tool_call",
    "tool_result",
    "message",
    "turn_completed",
]


def chat(client: ApiClient, agent: dict, message: str, **headers: str) -> dict[str, Any]:
    response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": message}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def event_types(turn: dict[str, Any]) -> list[str]:
    return [e["type"] for e in turn["events"]]


def tool_results(turn: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in turn["events"] if e["type"] == "tool_result"]


def block_value(client: TestClient, agent: dict, label: str) -> str:
    blocks = client.get(f"/v1/agents/{agent['id']}/memory").json()["blocks"]
    return next(b["value"] for b in blocks if b["label"] == label)


def reply_with_recalled_memories(request: dict[str, Any]) -> dict[str, Any]:
    """A scripted answer that sends back the prompt's "possibly relevant memories" section, or "(nothing recalled)"."""
    system = request["messages"][0]["content"]
    section = system.split("## Possibly relevant memories", 1)[1] if "## Possibly relevant memories" in system else ""
    return tools(call("send_message", text=section or "(nothing recalled)"))


def wait_for_message_vectors(database_url: str, agent: dict, timeout: float = 60.0) -> None:
    """Until every user and assistant message of the agent has its vector: turns store them in the background, and
    a burst of turns on a loaded machine leaves a queue of them (a message without one is found by its words only)."""
    pending = "SELECT count(*) FROM messages WHERE agent_id = :a AND role IN ('user', 'assistant') AND embedding_model IS NULL"
    deadline = time.monotonic() + timeout
    while run_sql(database_url, pending, {"a": agent["id"]})[0][0]:
        assert time.monotonic() < deadline, "message vectors still missing"
        time.sleep(0.05)


def finished_pass(client: TestClient, agent: dict, pass_id: str, within: float = 20.0) -> dict[str, Any]:
    """The pass once it has ended (its stored turn, as GET …/turns/{id} replays it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        turn = client.get(f"/v1/agents/{agent['id']}/turns/{pass_id}").json()
        if turn["status"] != "running":
            return turn
        time.sleep(0.05)
    raise AssertionError(f"the memory pass {pass_id} did not end within {within}s: {turn}")
