"""Letta agent files (.af) of both schema generations import as Engram agents; what Engram lacks is reported."""

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support import DATA
from tests.support.portability import counts
from tests.support.service import forget_agents_named

# Copies of ../shared/data/letta-af (see SOURCE.md there): a clean clone has them too.
LETTA_FILES = DATA / "letta-af"


def read_af(path: Path) -> dict[str, Any]:
    """What the file holds, read independently of the importer (some exports are JSON serialised twice)."""
    body = json.loads(path.read_text())
    return json.loads(body) if isinstance(body, str) else body


AF_FILES = sorted(path.name for path in LETTA_FILES.glob("*.af"))


def test_the_letta_files_are_there() -> None:
    assert {"memgpt_agent.af", "memgpt_agent_with_convo.af", "customer_service.af"} <= set(AF_FILES)


@pytest.mark.parametrize("name", AF_FILES)
def test_each_letta_file_imports(client: TestClient, name: str) -> None:
    raw = (LETTA_FILES / name).read_bytes()  # sent as it is: a JSON string holding the JSON, for some of them
    letta = read_af(LETTA_FILES / name)
    agent_file = letta["agents"][0]
    forget_agents_named(client, agent_file["name"])
    response = client.post("/v1/agents/import", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 201, response.text
    result = response.json()
    assert result["source"] == "letta"
    agent = result["agent"]
    assert agent["name"] == agent_file["name"]
    assert agent["system"] == agent_file["system"]

    blocks = {b["id"]: b for b in letta["blocks"]}
    expected = {blocks[i]["label"]: blocks[i] for i in agent_file["block_ids"]}
    memory = {b["label"]: b for b in client.get(f"/v1/agents/{agent['id']}/memory").json()["blocks"]}
    assert set(memory) == set(expected)
    for label, block in expected.items():
        assert memory[label]["value"] == block["value"]
        assert memory[label]["limit"] == block["limit"]
        assert memory[label]["description"] == block["description"]
        assert memory[label]["read_only"] == block["read_only"]

    messages = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert len(messages) == result["messages"] == len(agent_file["messages"])
    assert messages[-1]["content"] == agent_file["messages"][0]["content"][0]["text"]

    # Every tool of the file is accounted for: run by an Engram tool, or listed as skipped.
    tools = {t["id"]: t["name"] for t in letta["tools"]}
    names = {tools[i] for i in agent_file["tool_ids"]}
    assert set(result["mapped_tools"]) | set(result["skipped_tools"]) == names
    assert not set(result["mapped_tools"]) & set(result["skipped_tools"])
    if name == "customer_service.af":
        assert sorted(result["skipped_tools"]) == ["cancel_order", "check_order_status", "escalate", "terminate_chat"]
    assert result["mapped_tools"]["conversation_search"] == "conversation_search"

    # The imported agent's prompt: Letta's system prompt as its instructions, its blocks as core memory; Letta's
    # compiled prompt (the file's first message) is kept in recall memory but is not in the context.
    context = client.get(f"/v1/agents/{agent['id']}/context").json()
    assert agent_file["system"] in context["system_prompt"]
    assert all(block["value"].strip() in context["system_prompt"] for block in expected.values())
    assert context["messages"] == [] and context["messages_out_of_context"] == 1


# A file of the first generation (letta ≤ 0.7), written to its schema: the agent at the top level, blocks inline in
# `core_memory`, tools inline, the context as indices, user messages packaged as JSON, send_message's `message`.
OLD_GENERATION = {
    "agent_type": "memgpt_agent",
    "name": "old_letta_agent",
    "system": "You are Letta, a digital companion.",
    "created_at": "2025-04-01T03:47:27",
    "core_memory": [
        {"label": "persona", "value": "I am Sam.", "limit": 5000, "description": None},
        {"label": "Customer-Notes", "value": "VIP since 2020", "limit": 300, "read_only": True, "description": "notes"},
    ],
    "tools": [
        {"name": "send_message", "json_schema": {"name": "send_message"}},
        {"name": "archival_memory_insert", "tool_type": "letta_core"},
        {"name": "web_search", "source_code": "def web_search(q): ..."},
    ],
    "tool_rules": [{"tool_name": "send_message", "type": "exit_loop"}],
    "in_context_message_indices": [0, 3, 4, 5, 6],
    "messages": [
        {"role": "system", "content": [{"type": "text", "text": "You are Letta… <persona>I am Sam.</persona>"}]},
        {"role": "user", "text": '{"type": "user_message", "message": "私の名前は花子です", "time": "…"}'},
        {
            "role": "assistant",
            "content": [{"type": "reasoning", "reasoning": "Remember her name."}],
            "tool_calls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "send_message", "arguments": '{"message": "はじめまして、花子さん"}'},
                }
            ],
            "created_at": "2025-04-01T03:48:00",
        },
        {"role": "tool", "content": '{"status": "OK"}', "tool_call_id": "call-1"},
        {"role": "user", "content": '{"type": "heartbeat", "reason": "request_heartbeat == true"}'},
        {"role": "user", "content": [{"type": "text", "text": "I like sailing."}]},
        {"role": "approval", "content": "approve?"},
        {"role": "assistant", "content": "Sailing sounds wonderful!"},
    ],
    "passages": [{"text": "Hanako's favourite sport is sailing", "tags": ["Hobby"]}],
}


def test_first_generation_file_imports(client: TestClient) -> None:
    response = client.post("/v1/agents/import", json=OLD_GENERATION, params={"name": "Sam"})
    assert response.status_code == 201, response.text
    result = response.json()
    agent = result["agent"]
    assert (agent["name"], agent["system"]) == ("Sam", "You are Letta, a digital companion.")
    assert result["mapped_tools"] == {"send_message": "send_message", "archival_memory_insert": "archival_memory_create"}
    assert result["skipped_tools"] == ["web_search"]
    assert any("tool rules" in n for n in result["notes"]) and any("'approval'" in n for n in result["notes"])
    assert any("'customer_notes'" in n for n in result["notes"])

    blocks = {b["label"]: b for b in agent["blocks"]}
    assert blocks["customer_notes"] | {"updated_at": None} == {
        "label": "customer_notes",
        "value": "VIP since 2020",
        "limit": 300,
        "description": "notes",
        "read_only": True,
        "version": 1,
        "updated_at": None,
    }
    messages = list(reversed(client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]))
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", "You are Letta… <persona>I am Sam.</persona>"),
        ("user", "私の名前は花子です"),
        ("assistant", "Remember her name."),
        ("tool", '{"status": "OK"}'),
        ("system", '{"type": "heartbeat", "reason": "request_heartbeat == true"}'),
        ("user", "I like sailing."),
        ("assistant", "Sailing sounds wonderful!"),
    ]
    call = messages[2]["tool_calls"][0]
    assert (call["id"], call["name"], json.loads(call["arguments"])) == (
        "call-1",
        "send_message",
        {"text": "はじめまして、花子さん"},
    )
    assert (messages[3]["tool_call_id"], messages[3]["name"]) == ("call-1", "send_message")
    assert messages[2]["created_at"].startswith("2025-04-01T03:48:00")

    # Letta's context (indices 3 onwards) is the imported agent's; what it sent is found by recall search.
    context = client.get(f"/v1/agents/{agent['id']}/context").json()
    assert context["messages_out_of_context"] == 3
    found = client.get(f"/v1/agents/{agent['id']}/messages", params={"query": "はじめまして", "include_context": "true"}).json()
    assert found["items"][0]["id"] == messages[2]["id"]
    passages = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "sailing"}).json()["items"]
    assert [(p["content"], p["tags"]) for p in passages] == [("Hanako's favourite sport is sailing", ["hobby"])]


def test_malformed_letta_files_are_422_and_write_nothing(client: TestClient, database_url: str) -> None:
    start = counts(database_url)
    raw = (LETTA_FILES / "memgpt_agent_with_convo.af").read_bytes()
    truncated = client.post("/v1/agents/import", content=raw[: len(raw) // 2], headers={"Content-Type": "application/json"})
    assert truncated.status_code == 422
    letta = read_af(LETTA_FILES / "memgpt_agent_with_convo.af")
    for broken, words in [
        ({**letta, "agents": []}, "no agent"),
        ({**letta, "agents": ["memgpt_agent"]}, "no agent"),
        ({**letta, "blocks": [{**letta["blocks"][0], "value": "x" * 100_001}]}, "over Engram's 100000"),
        ({**OLD_GENERATION, "core_memory": [{"label": f"b{i}", "value": ""} for i in range(33)]}, "at most 32"),
        ({**OLD_GENERATION, "llm_config": "gpt-4"}, "not a readable Letta agent file"),
        ({**OLD_GENERATION, "in_context_message_ids": [{"id": 1}]}, "not a readable Letta agent file"),
        # Readable, but a NUL character at the last row, which PostgreSQL cannot store: refused before anything is written.
        (
            {**OLD_GENERATION, "messages": [*OLD_GENERATION["messages"], {"role": "user", "content": "a\u0000b"}]},
            f"messages.{len(OLD_GENERATION['messages'])}.content: must not contain a NUL character",
        ),
    ]:
        response = client.post("/v1/agents/import", json=broken)
        assert response.status_code == 422, response.text
        assert words in response.json()["detail"]
    assert counts(database_url) == start
