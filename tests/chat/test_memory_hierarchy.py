"""The memory hierarchy under pressure: context eviction with a recursive summary, recall search of evicted
messages, memories retrieved into the prompt without a search tool call."""

import uuid
from typing import Any

from fastapi.testclient import TestClient

from app.chat.context import SUMMARY_MAX_CHARS, fallback_summary
from app.memory.models import Message
from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.support.chat import chat, reply_with_recalled_memories, tool_results, wait_for_message_vectors

FILLER = "We talked about the weather, the trains and the price of coffee in the city centre once more. " * 6


def is_summary_request(request: dict[str, Any]) -> bool:
    return not request.get("tools")


def answer(request: dict[str, Any]) -> dict[str, Any]:
    if is_summary_request(request):
        transcript = request["messages"][-1]["content"]
        return text(f"Summary so far ({transcript.count('user:')} user messages summarised): the user shares daily notes.")
    return tools(call("send_message", text="Noted."))


def assert_calls_and_results_stay_together(messages: list[dict[str, Any]]) -> None:
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, "a tool result without its call"
            pending.discard(message["tool_call_id"])
        else:
            assert not pending, "a tool call without its result"
            pending = {c["id"] for c in message.get("tool_calls") or []}


def test_overflowing_conversation_is_summarised_and_evicted_messages_stay_searchable(
    small_context: TestClient, llm: ScriptedLLM, database_url: str
) -> None:
    client = small_context
    agent = client.post("/v1/agents", json={"name": "diarist"}).json()
    llm.reset(fallback=answer)
    chat(client, agent, "Remember: my locker code is PLUM-4471. " + FILLER)
    saw_pressure = False
    for day in range(1, 12):
        chat(client, agent, f"Day {day} notes. {FILLER}")
        saw_pressure |= any("## Memory pressure" in r["messages"][0]["content"] for r in llm.requests if r.get("tools"))

    context = client.get(f"/v1/agents/{agent['id']}/context").json()
    assert context["summary"] and context["summary"].startswith("Summary so far")
    assert context["messages_out_of_context"] > 0
    assert context["tokens"]["total"] <= context["tokens"]["evict_at"]
    assert context["messages"][0]["role"] == "user"
    assert "locker code" not in " ".join(m["content"] for m in context["messages"])
    assert saw_pressure, "the agent was never warned before eviction"
    assert any(is_summary_request(r) for r in llm.requests)
    for request in llm.requests:
        if request.get("tools"):
            assert_calls_and_results_stay_together(request["messages"][1:])
            assert request["messages"][1]["role"] == "user"

    # The eleven turns' vectors queue behind one another: as a later session would, search once they are stored.
    wait_for_message_vectors(database_url, agent)
    searched: list[bool] = []

    def search_then_answer(request: dict[str, Any]) -> dict[str, Any]:
        if is_summary_request(request):  # the turn may start by evicting: that request is no step of the agent
            return answer(request)
        if not searched:
            searched.append(True)
            return tools(call("conversation_search", query="locker code"))
        return tools(call("send_message", text="PLUM-4471"))

    llm.reset(fallback=search_then_answer)
    turn = chat(client, agent, "What was my locker code?")
    [found, _] = tool_results(turn)
    assert found["ok"] and "PLUM-4471" in found["result"]
    assert turn["reply"] == "PLUM-4471"
    evicted_hits = client.get(f"/v1/agents/{agent['id']}/messages", params={"query": "locker code"}).json()["items"]
    assert "PLUM-4471" in evicted_hits[0]["content"]
    # Eviction never lost a message: recall memory still has all of them.
    everything = client.get(f"/v1/agents/{agent['id']}/messages", params={"limit": 200}).json()["items"]
    assert sum(m["role"] == "user" for m in everything) == 13


def test_archival_answer_reaches_the_prompt_without_a_search_call(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    client.post(
        f"{base}/batch",
        json={
            "items": [
                {"content": "The user's dentist appointment is on March 3rd at 10am"},
                {"content": "The user prefers aisle seats on long flights"},
                {"content": "The user's cat is named Mochi"},
                {"content": "ユーザーの好きな食べ物はラーメンです"},
            ]
        },
    )

    llm.reset(reply_with_recalled_memories, reply_with_recalled_memories, reply_with_recalled_memories)
    cat = chat(client, agent, "What is my cat called again?")["reply"]
    assert "Mochi" in cat and "dentist" not in cat
    food = chat(client, agent, "僕の好きな食べ物は何？")["reply"]
    assert "ラーメン" in food and "Mochi" not in food
    unrelated = chat(client, agent, "Can you explain how photosynthesis works?")["reply"]
    assert unrelated == "(nothing recalled)"


def test_a_summary_that_keeps_failing_stays_one_bounded_pointer() -> None:
    # An LLM that never summarises (the soak's scripted one answers every request with a tool call) used to add a
    # line per eviction: after 2,500 turns the summary filled the window and every turn evicted.
    evicted = [Message(agent_id=uuid.uuid4(), role="user", content=f"message {i}") for i in range(7)]
    summary = fallback_summary("The user is Ken, a baker in Osaka.", evicted)
    for _ in range(500):
        summary = fallback_summary(summary, evicted)
    assert summary == (
        "The user is Ken, a baker in Osaka.\n(3507 earlier messages could not be summarised; find them with conversation_search.)"
    )
    long = fallback_summary("x" * (SUMMARY_MAX_CHARS + 100), evicted)
    assert len(long) == SUMMARY_MAX_CHARS and long.endswith(
        "(7 earlier messages could not be summarised; find them with conversation_search.)"
    )
    assert (
        fallback_summary(None, evicted[:2]) == "(2 earlier messages could not be summarised; find them with conversation_search.)"
    )
