"""Letta's official SDK (letta-client) against Engram's /letta API, as a Letta user's code would drive it: the
quickstart (an agent with two blocks, a turn that changes a block, a block updated, passages in Japanese added and
searched, the conversation listed, a turn streamed, deletion), and an agent file round trip."""

import json
import threading

import pytest
from fastapi.testclient import TestClient
from letta_client import NotFoundError
from letta_client.types import ToolReturnMessage
from letta_client.types.agents import AssistantMessage, ReasoningMessage, SystemMessage, ToolCall, ToolCallMessage, UserMessage
from letta_client.types.agents.letta_streaming_response import LettaUsageStatistics

from testkit.scripted_llm import ScriptedLLM, call, held, text, tools
from tests.support import DATA
from tests.support.letta import letta_sdk, unique

LETTA_FILES = DATA / "letta-af"


def test_quickstart(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    name = unique("quickstart")
    agent = sdk.agents.create(
        name=name,
        model="openai/gpt-4o-mini",
        embedding="openai/text-embedding-3-small",
        memory_blocks=[
            {"label": "human", "value": "The human's name is Chad."},
            {"label": "persona", "value": "My name is Sam, the all-knowing sentient AI.", "limit": 5000},
        ],
        tools=["web_search", "run_code"],
        tags=["quickstart"],
    )
    assert agent.id.startswith("agent-") and agent.name == name and agent.system == ""
    assert {b.label: b.value for b in agent.memory.blocks} == {
        "human": "The human's name is Chad.",
        "persona": "My name is Sam, the all-knowing sentient AI.",
    }
    assert {b.label: b.limit for b in agent.blocks} == {"human": 2000, "persona": 5000}
    assert all(b.id and b.id.startswith("block-") for b in agent.blocks)
    assert "send_message" in {t.name for t in agent.tools} and agent.llm_config.model == "scripted-model"
    assert sdk.agents.retrieve(agent.id).name == name
    assert agent.id in [a.id for a in sdk.agents.list(name=name)]

    # A turn: the agent corrects the human block through its tool, then replies.
    llm.reset(
        tools(call("core_memory_replace", label="human", old="Chad", new="Aiko"), content="The user gave their name."),
        tools(call("send_message", text="はじめまして、アイコさん！")),
    )
    response = sdk.agents.messages.create(agent_id=agent.id, messages=[{"role": "user", "content": "私の名前はアイコです"}])
    assert [m.message_type for m in response.messages] == [
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    reasoning, tool_call, tool_return, reply = response.messages
    assert isinstance(reasoning, ReasoningMessage) and isinstance(tool_call, ToolCallMessage)
    assert isinstance(tool_return, ToolReturnMessage) and isinstance(reply, AssistantMessage)
    assert reasoning.reasoning == "The user gave their name."
    called = tool_call.tool_call
    assert isinstance(called, ToolCall)  # whole, not a streamed delta
    assert called.name == "core_memory_replace"
    assert json.loads(called.arguments)["new"] == "Aiko"
    assert tool_return.status == "success"
    assert tool_return.tool_call_id == called.tool_call_id
    assert reply.content == "はじめまして、アイコさん！"
    assert response.stop_reason.stop_reason == "end_turn"
    usage = response.usage
    assert usage.step_count == 2 and usage.total_tokens == (usage.prompt_tokens or 0) + (usage.completion_tokens or 0) > 0
    assert usage.run_ids and usage.run_ids[0].startswith("run-")

    # The block the agent changed, and a block updated by the user.
    assert sdk.agents.blocks.retrieve("human", agent_id=agent.id).value == "The human's name is Aiko."
    persona = sdk.agents.blocks.update("persona", agent_id=agent.id, value="My name is Sam.", limit=3000, description="who I am")
    assert (persona.value, persona.limit, persona.description) == ("My name is Sam.", 3000, "who I am")
    assert [b.label for b in sdk.agents.blocks.list(agent.id)] == ["human", "persona"]
    history = client.get(f"/v1/agents/{agent.id.removeprefix('agent-')}/memory/persona/history").json()["items"]
    assert [r["value"] for r in history] == ["My name is Sam.", "My name is Sam, the all-knowing sentient AI."]

    # Archival memory in Japanese: added, listed oldest first, searched by meaning and by tag.
    ramen = sdk.agents.passages.create(agent_id=agent.id, text="アイコさんは毎週金曜日にラーメンを食べます", tags=["food"])
    tokyo = sdk.agents.passages.create(agent_id=agent.id, text="アイコさんは東京の下北沢に住んでいます", tags=["place"])
    assert ramen[0].id and ramen[0].id.startswith("passage-") and ramen[0].tags == ["food"]
    assert [p.text for p in sdk.agents.passages.list(agent.id)] == [ramen[0].text, tokyo[0].text]
    found = sdk.agents.passages.search(agent_id=agent.id, query="好きな食べ物は？ラーメン")
    assert found.count == len(found.results) >= 1 and found.results[0].content == ramen[0].text
    by_tag = sdk.agents.passages.search(agent_id=agent.id, query="アイコさん", tags=["place"])
    assert [r.content for r in by_tag.results] == [tokyo[0].text]
    either = sdk.agents.passages.search(agent_id=agent.id, query="アイコさん", tags=["place", "food"], tag_match_mode="any")
    assert {r.content for r in either.results} == {ramen[0].text, tokyo[0].text}
    assert (
        sdk.agents.passages.search(agent_id=agent.id, query="アイコさん", tags=["place", "food"], tag_match_mode="all").count == 0
    )

    # The conversation, oldest first: the user's message, then the agent's step as Letta shows it.
    conversation = list(sdk.agents.messages.list(agent.id, order="asc"))
    assert [m.message_type for m in conversation] == [
        "user_message",
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    said, replied = conversation[0], conversation[-1]
    assert isinstance(said, UserMessage) and isinstance(replied, AssistantMessage)
    assert said.content == "私の名前はアイコです"
    assert replied.content == "はじめまして、アイコさん！"
    assert conversation[1].id == conversation[2].id != conversation[4].id  # one stored message per step, as in Letta
    newest = sdk.agents.messages.list(agent.id, limit=1).items  # the first page alone
    assert [m.message_type for m in newest] == ["assistant_message"]  # newest first by default

    # A streamed turn.
    llm.reset(tools(call("send_message", text="ラーメンですね。")))
    streamed = list(sdk.agents.messages.stream(agent_id=agent.id, messages=[{"role": "user", "content": "好きな食べ物は？"}]))
    assert [m.message_type for m in streamed] == ["assistant_message", "stop_reason", "usage_statistics"]

    # Deletion: a passage, then the agent.
    sdk.agents.passages.delete(ramen[0].id, agent_id=agent.id)
    assert [p.text for p in sdk.agents.passages.list(agent.id)] == [tokyo[0].text]
    sdk.agents.delete(agent.id)
    with pytest.raises(NotFoundError):
        sdk.agents.retrieve(agent.id)


def test_a_streamed_turn_yields_each_step_while_the_turn_runs(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("streamer"), memory_blocks=[{"label": "human", "value": ""}])
    last_reply = threading.Event()  # the scripted LLM holds its last answer until the test has seen the first step
    llm.reset(
        tools(call("archival_memory_create", content="アイコさんは猫を二匹飼っています"), content="Worth keeping."),
        held(tools(call("send_message", text="猫ちゃんのこと、覚えました。")), last_reply, timeout=8),
    )
    seen: list[tuple[str, bool]] = []
    with sdk.agents.messages.stream(agent_id=agent.id, messages=[{"role": "user", "content": "猫を二匹飼っています"}]) as stream:
        for item in stream:
            seen.append((str(item.message_type), last_reply.is_set()))
            if item.message_type == "tool_return_message":
                last_reply.set()
    assert [kind for kind, _ in seen] == [
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "stop_reason",
        "usage_statistics",
    ]
    # The tool call and its return arrived while the LLM still held its last reply; the reply came after.
    assert [released for _, released in seen[:3]] == [False, False, False]
    assert seen[3] == ("assistant_message", True)


def test_create_with_streaming_true_streams(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("create-stream"), memory_blocks=[])
    llm.reset(text("thinking aloud, no tool"), tools(call("send_message", text="done")))
    stream = sdk.agents.messages.create(agent_id=agent.id, input="hello", streaming=True)
    items = list(stream)
    assert [i.message_type for i in items] == ["reasoning_message", "assistant_message", "stop_reason", "usage_statistics"]
    usage = items[-1]
    assert isinstance(usage, LettaUsageStatistics) and usage.step_count == 2


def test_agent_file_round_trip(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    name = unique("traveller")
    agent = sdk.agents.create(
        name=name,
        system="Answer in Japanese.",
        memory_blocks=[
            {"label": "human", "value": "名前: アイコ", "description": "the user"},
            {"label": "persona", "value": "Sam"},
        ],
    )
    llm.reset(tools(call("send_message", text="こんにちは、アイコさん")))
    sdk.agents.messages.create(agent_id=agent.id, messages=[{"role": "user", "content": "こんにちは"}])
    sdk.agents.passages.create(agent_id=agent.id, text="アイコさんは京都の出身です", tags=["origin"])

    exported = sdk.agents.export_file(agent.id)
    agent_file = json.loads(exported)
    [entry] = agent_file["agents"]
    assert (entry["name"], entry["system"]) == (name, "Answer in Japanese.")
    assert {b["label"]: b["value"] for b in agent_file["blocks"]} == {"human": "名前: アイコ", "persona": "Sam"}
    assert [p["text"] for p in agent_file["passages"]] == ["アイコさんは京都の出身です"]
    assert [m["role"] for m in entry["messages"]] == ["user", "assistant", "tool"]
    send = entry["messages"][1]["tool_calls"][0]["function"]
    assert send["name"] == "send_message" and json.loads(send["arguments"]) == {"message": "こんにちは、アイコさん"}

    imported = sdk.agents.import_file(file=("agent.af", exported.encode(), "application/json"), append_copy_suffix=True)
    [copy_id] = imported.agent_ids
    copy = sdk.agents.retrieve(copy_id)
    assert copy.id != agent.id and copy.name == f"{name}_copy" and copy.system == "Answer in Japanese."
    assert {(b.label, b.value, b.description) for b in copy.blocks} == {(b.label, b.value, b.description) for b in agent.blocks}
    original = [(m.message_type, getattr(m, "content", None)) for m in sdk.agents.messages.list(agent.id, order="asc")]
    copied = [(m.message_type, getattr(m, "content", None)) for m in sdk.agents.messages.list(copy_id, order="asc")]
    assert copied == original == [("user_message", "こんにちは"), ("assistant_message", "こんにちは、アイコさん")]
    found = sdk.agents.passages.search(agent_id=copy_id, query="京都", tags=["origin"])
    assert [r.content for r in found.results] == ["アイコさんは京都の出身です"]

    # Without a conversation, and under a name of its own.
    bare = sdk.agents.export_file(agent.id, scrub_messages=True)
    assert json.loads(bare)["agents"][0]["messages"] == []
    renamed = sdk.agents.import_file(file=("bare.af", bare.encode(), "application/json"), name=unique("bare"))
    assert list(sdk.agents.messages.list(renamed.agent_ids[0])) == []


def test_a_letta_agent_file_imports_through_the_sdk(client: TestClient) -> None:
    sdk = letta_sdk(client)
    raw = (LETTA_FILES / "memgpt_agent_with_convo.af").read_bytes()
    imported = sdk.agents.import_file(file=("memgpt_agent_with_convo.af", raw), name=unique("from-letta"))
    agent = sdk.agents.retrieve(imported.agent_ids[0])
    assert {b.label for b in agent.blocks} >= {"human", "persona"}
    conversation = list(sdk.agents.messages.list(agent.id, order="asc"))
    assert [m.message_type for m in conversation] == ["system_message"]  # the file's one message: Letta's compiled prompt
    [system] = conversation
    assert isinstance(system, SystemMessage) and "<base_instructions>" in system.content
