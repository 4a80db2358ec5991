"""Forgetting a message of the agent's own conversation (app/chat/forgetting.py), against the scripted LLM: it leaves
the next turn's context (kept contexts included), its turn's record and the search results that quoted it; an
assistant's message takes its tool results along; a summary that may quote it is withdrawn; a running turn is waited
for."""

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, held, text, tools
from tests.chat.test_memory_hierarchy import assert_calls_and_results_stay_together
from tests.support.chat import chat, finished_pass
from tests.support.database import run_sql
from tests.support.service import checked_client

SECRET = "PLUM-4471"
ERASED = "[erased]"


def messages(client: TestClient, agent: dict) -> list[dict[str, Any]]:
    """The agent's messages, oldest first."""
    return list(reversed(client.get(f"/v1/agents/{agent['id']}/messages", params={"limit": 200}).json()["items"]))


def forget(client: TestClient, agent: dict, message_id: str, status: int = 200) -> dict[str, Any]:
    response = client.delete(f"/v1/agents/{agent['id']}/messages/{message_id}")
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    return body


def replay(client: TestClient, agent: dict, turn_id: str) -> dict[str, Any]:
    turn: dict[str, Any] = client.get(f"/v1/agents/{agent['id']}/turns/{turn_id}").json()
    return turn


def test_a_forgotten_message_leaves_the_next_turns_context_and_its_turns_record(
    client: TestClient, agent: dict, llm: ScriptedLLM
) -> None:
    llm.reset(fallback=tools(call("send_message", text="Noted.")))
    first = chat(client, agent, f"My locker code is {SECRET}.")
    chat(client, agent, "Nice weather today.")
    assert SECRET in json.dumps(llm.requests[-1]["messages"])  # in the context this process keeps between turns
    [said] = [m for m in messages(client, agent) if SECRET in m["content"]]

    erased = forget(client, agent, said["id"])
    assert erased["erased_messages"] == [said["id"]] and erased["summary_withdrawn"] is False
    chat(client, agent, "What was my locker code?")
    request = llm.requests[-1]
    assert SECRET not in json.dumps(request) and request["messages"][1]["role"] == "user"
    assert_calls_and_results_stay_together(request["messages"][1:])
    record = replay(client, agent, first["turn_id"])
    assert SECRET not in json.dumps(record)
    assert record["events"][0]["message"] == ERASED and record["reply"] == "Noted."


def test_an_assistants_message_goes_with_its_tool_results_and_a_result_alone_is_refused(
    client: TestClient, agent: dict, llm: ScriptedLLM
) -> None:
    llm.reset(
        tools(call("archival_memory_search", query="locker"), content=f"Looking for {SECRET}."),
        tools(call("send_message", text=f"Your code is {SECRET}.")),
        fallback=tools(call("send_message", text="Noted.")),
    )
    turn = chat(client, agent, "What is my locker code?")
    _, searching, result, replying, _ = messages(client, agent)
    assert (searching["role"], result["role"], replying["role"]) == ("assistant", "tool", "assistant")

    refused = forget(client, agent, result["id"], status=422)
    assert refused["error"] == "invalid_request" and searching["id"] in refused["detail"]
    for message in (searching, replying):
        erased = forget(client, agent, message["id"])
        assert len(erased["erased_messages"]) == 2 and erased["erased_messages"][0] == message["id"]
    assert [m["role"] for m in messages(client, agent)] == ["user"]

    record = replay(client, agent, turn["turn_id"])
    assert SECRET not in json.dumps(record) and record["reply"] == ERASED
    by_type = {e["type"]: e for e in record["events"]}
    assert by_type["reasoning"]["text"] == ERASED and by_type["message"]["text"] == ERASED
    assert all(e["arguments"] == {} for e in record["events"] if e["type"] == "tool_call")
    assert all(e["result"] == ERASED for e in record["events"] if e["type"] == "tool_result")
    chat(client, agent, "Hello again.")
    assert SECRET not in json.dumps(llm.requests[-1])
    assert_calls_and_results_stay_together(llm.requests[-1]["messages"][1:])


def test_an_assistants_message_that_sent_no_text_leaves_the_turns_reply_as_it_was(
    client: TestClient, agent: dict, llm: ScriptedLLM
) -> None:
    """Its send_message calls failed (no text, a null one): it sent nothing, and the reply, another message's, stays."""
    llm.reset(
        tools(call("send_message"), call("send_message", text=None), content="Replying."),
        fallback=tools(call("send_message", text="Noted.")),
    )
    turn = chat(client, agent, "Hello.")
    assert turn["reply"] == "Noted."
    failed = next(m for m in messages(client, agent) if m["role"] == "assistant" and m["content"] == "Replying.")

    forget(client, agent, failed["id"])
    record = replay(client, agent, turn["turn_id"])
    assert record["reply"] == "Noted." and [e["text"] for e in record["events"] if e["type"] == "message"] == ["Noted."]
    assert next(e for e in record["events"] if e["type"] == "turn_completed")["reply"] == "Noted."


def test_search_results_that_quoted_a_forgotten_message_no_longer_do(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    handed = client.post(
        f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": f"My locker code is {SECRET}."}]}
    )
    [said] = handed.json()["message_ids"]
    llm.reset(tools(call("conversation_search", query="locker code")), fallback=tools(call("send_message", text="Found it.")))
    turn = chat(client, agent, "Do you remember my locker code?")
    quoting = next(e for e in turn["events"] if e["type"] == "tool_result")
    assert f"user: My locker code is {SECRET}." in quoting["result"]

    forget(client, agent, said)
    record = replay(client, agent, turn["turn_id"])
    [result] = [e["result"] for e in record["events"] if e["type"] == "tool_result" and e["name"] == "conversation_search"]
    assert SECRET not in result and f"user: {ERASED}" in result
    [tool] = [m for m in messages(client, agent) if m["role"] == "tool" and m["name"] == "conversation_search"]
    assert tool["content"] == result
    chat(client, agent, "Thanks.")
    assert SECRET not in json.dumps(llm.requests[-1])


def test_a_summary_that_may_quote_a_forgotten_message_is_withdrawn(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str
) -> None:
    llm.reset(fallback=tools(call("send_message", text="Noted.")))
    chat(client, agent, f"My locker code is {SECRET}.")
    chat(client, agent, "Nice weather today.")
    said, _, _, weather, noted, _ = messages(client, agent)
    # The first turn leaves the context for a summary that quotes it, as eviction would have written it.
    start = run_sql(database_url, "SELECT seq FROM messages WHERE id = :id", {"id": uuid.UUID(weather["id"])})[0][0]
    summary = f"The user's locker code is {SECRET}."
    run_sql(
        database_url,
        "UPDATE agents SET summary = :summary, context_start_seq = :start WHERE id = :id",
        {"summary": summary, "start": start, "id": uuid.UUID(agent["id"])},
    )

    assert forget(client, agent, noted["id"])["summary_withdrawn"] is False  # in the context: never summarised
    assert client.get(f"/v1/agents/{agent['id']}/context").json()["summary"] == summary
    assert forget(client, agent, said["id"])["summary_withdrawn"] is True
    context = client.get(f"/v1/agents/{agent['id']}/context").json()
    assert context["summary"] == "(2 earlier messages could not be summarised; find them with conversation_search.)"
    chat(client, agent, "What was my locker code?")
    assert SECRET not in json.dumps(llm.requests[-1])


def asked(llm: ScriptedLLM, requests: int) -> None:
    """Until the scripted LLM has been asked `requests` times."""
    deadline = time.monotonic() + 10
    while len(llm.requests) < requests:
        assert time.monotonic() < deadline, f"the LLM was asked {len(llm.requests)} times, not {requests}"
        time.sleep(0.02)


def test_forgetting_waits_for_a_running_turn_or_memory_pass(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    answer, summed_up = threading.Event(), threading.Event()
    with checked_client(create_app(settings.model_copy(update={"turn_lock_timeout_seconds": 0.5}), embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": f"forgetful {uuid.uuid4().hex[:8]}"}).json()
        llm.reset(
            tools(call("send_message", text="first")),
            held(tools(call("send_message", text="done")), answer),
            held(text("nothing worth keeping"), summed_up),
        )
        chat(client, agent, f"My locker code is {SECRET}.")
        [said] = [m for m in messages(client, agent) if SECRET in m["content"]]
        path = f"/v1/agents/{agent['id']}/messages/{said['id']}"
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(client.post, f"/v1/agents/{agent['id']}/chat", json={"message": "Anything new?"})
            asked(llm, 2)  # the turn holds the agent's lock while the LLM answers
            busy = client.delete(path)
            answer.set()
            assert running.result().status_code == 200
        assert busy.status_code == 409 and busy.json()["error"] == "agent_busy"
        pass_id = client.post(f"/v1/agents/{agent['id']}/memory-pass").json()["pass_id"]
        asked(llm, 3)  # the pass holds its lock while the LLM reads the conversation
        busy = client.delete(path)
        summed_up.set()
        assert busy.status_code == 409 and busy.json()["error"] == "agent_busy"
        assert finished_pass(client, agent, pass_id)["status"] == "completed"
        assert SECRET in json.dumps(messages(client, agent))  # nothing was erased
        forget(client, agent, said["id"])
        assert SECRET not in json.dumps(messages(client, agent))
