"""Conversations handed in without running the agent, and sleep-time memory passes over what was said: the agent's LLM
with memory tools only, streamed and replayable as a turn of its own kind."""

import re
import threading
import time
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, held, last_tool_result, slow, text, tools
from tests.support.chat import block_value, chat, finished_pass
from tests.support.portability import settled_export
from tests.support.service import at, checked_client, forget_agents_named, scripted_settings, tenant_with_key

TOKYO_LISTED = re.compile(r"- id ([0-9a-f-]{36}) \[2019-04-01\] The user lives in Tokyo\.")
MOVE = [
    {"role": "user", "content": "I moved from Tokyo to Osaka last week.", "occurred_at": "2024-10-01T09:00:00Z", "id": "m1"},
    {"role": "assistant", "content": "Exciting! How is Osaka?", "occurred_at": "2024-10-01T09:00:05Z", "id": "m2"},
    {"role": "user", "content": "Great. I started working at a bakery there.", "occurred_at": "2024-10-01T09:01:00Z", "id": "m3"},
]


def messages_url(agent: dict) -> str:
    return f"/v1/agents/{agent['id']}/messages"


def test_a_conversation_handed_in_is_recall_memory_only(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset()
    response = client.post(messages_url(agent), json={"messages": MOVE})
    assert response.status_code == 201, response.text
    handed = response.json()
    assert (handed["stored"], handed["already_stored"], handed["memory_pass_id"]) == (3, 0, None)
    assert llm.requests == []  # the agent did not run

    # A retry stores nothing twice, and answers with the same ids; a new message in it is stored.
    retry = client.post(messages_url(agent), json={"messages": [*MOVE, {"role": "user", "content": "Also, I got a cat."}]})
    assert retry.status_code == 201, retry.text
    assert (retry.json()["stored"], retry.json()["already_stored"]) == (1, 3)
    assert retry.json()["message_ids"][:3] == handed["message_ids"]

    listed = client.get(messages_url(agent)).json()["items"]
    assert [m["content"] for m in listed] == ["Also, I got a cat.", *[m["content"] for m in reversed(MOVE)]]
    assert all(m["handed_in"] for m in listed)
    dated = {m["content"]: at(m["occurred_at"]) for m in listed}
    assert dated["I moved from Tokyo to Osaka last week."] == datetime(2024, 10, 1, 9, tzinfo=UTC)

    # Searchable (by meaning and words) though never in the agent's context.
    found = client.get(messages_url(agent), params={"query": "moving from Tokyo"}).json()["items"]
    assert "I moved from Tokyo to Osaka last week." in [m["content"] for m in found[:2]], found
    assert client.get(f"/v1/agents/{agent['id']}/context").json()["messages"] == []

    # The agent's own search finds them too.
    llm.reset(
        tools(call("conversation_search", query="bakery")),
        lambda request: tools(call("send_message", text=last_tool_result(request))),
    )
    searched = chat(client, agent, "Where do I work?")["reply"]
    assert "[2024-10-01 09:01] user: Great. I started working at a bakery there." in searched


def test_an_id_handed_in_again_with_another_message_is_a_409_naming_it(client: TestClient, agent: dict) -> None:
    assert client.post(messages_url(agent), json={"messages": MOVE}).status_code == 201
    other_times = [{**m, "occurred_at": "2024-10-02T09:00:00Z"} for m in MOVE]
    for changed, named in (
        ({**MOVE[0], "content": "I moved from Tokyo to Kyoto last week."}, "'m1' (other content)"),
        ({**MOVE[0], "role": "assistant"}, "'m1' (other role)"),
        (other_times[0], "'m1' (other occurred_at)"),
    ):
        new = {"role": "user", "content": "A new message, not to be stored.", "id": "m9"}
        refused = client.post(messages_url(agent), json={"messages": [new, changed, *MOVE[1:]]})
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == "conflict" and named in refused.json()["detail"], refused.json()
    several = client.post(messages_url(agent), json={"messages": other_times}).json()["detail"]
    assert "'m1' (other occurred_at); 'm2' (other occurred_at); 'm3' (other occurred_at)" in several

    # A true retry (without a time: dated when first stored) is still a success that stores nothing new.
    untimed = [{k: v for k, v in m.items() if k != "occurred_at"} for m in MOVE]
    retry = client.post(messages_url(agent), json={"messages": untimed})
    assert retry.status_code == 201 and (retry.json()["stored"], retry.json()["already_stored"]) == (0, 3)
    listed = client.get(messages_url(agent)).json()["items"]
    assert sorted(m["content"] for m in listed) == sorted(m["content"] for m in MOVE)


def test_a_bad_hand_in_is_a_422_naming_what_is_wrong(client: TestClient, agent: dict) -> None:
    bad = [
        ({"messages": [{"role": "user", "content": "hi", "occurred_at": "last spring"}]}, "messages.0.occurred_at"),
        ({"messages": [{"role": "tool", "content": "hi"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": ""}]}, "messages.0.content"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "a", "id": "x"}, {"role": "user", "content": "b", "id": "x"}]}, "x"),
        ({"messages": [{"role": "user", "content": "hi", "name": "bob"}]}, "messages.0.name"),
    ]
    for body, named in bad:
        response = client.post(messages_url(agent), json=body)
        assert response.status_code == 422, (body, response.text)
        assert named in response.json()["detail"], response.json()
    assert client.get(messages_url(agent)).json()["items"] == []


def test_a_tenant_cannot_hand_in_to_another_tenants_agent(keyed: TestClient) -> None:
    _, key_a = tenant_with_key(keyed, "hand-in-tenant-a")
    _, key_b = tenant_with_key(keyed, "hand-in-tenant-b")
    a, b = {"Authorization": f"Bearer {key_a}"}, {"Authorization": f"Bearer {key_b}"}
    agent_a = keyed.post("/v1/agents", json={"name": "a"}, headers=a).json()
    assert keyed.post(messages_url(agent_a), json={"messages": MOVE}, headers=b).status_code == 404
    assert keyed.post(f"/v1/agents/{agent_a['id']}/memory-pass", headers=b).status_code == 404
    assert keyed.get(messages_url(agent_a), headers=a).json()["items"] == []


def test_a_memory_pass_over_a_handed_in_conversation(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    base = f"/v1/agents/{agent['id']}"
    assert client.put(f"{base}/memory/human", json={"value": "Lives in Tokyo."}).status_code in (200, 201)
    tokyo = client.post(f"{base}/archival", json={"content": "The user lives in Tokyo.", "occurred_at": "2019-04-01"}).json()

    def supersede_tokyo(request: dict[str, Any]) -> dict[str, Any]:
        listed = TOKYO_LISTED.search(request["messages"][-2]["content"])  # the result of storing the Osaka fact
        assert listed, request["messages"][-2]["content"]
        return tools(call("archival_memory_supersede", passage_id=listed.group(1), content="The user lives in Osaka."))

    llm.reset(
        tools(
            call("archival_memory_create", content="The user lives in Osaka.", occurred_at="2024-10-01"),
            call("archival_memory_create", content="The user works at a bakery in Osaka.", occurred_at="2024-10-01"),
            content="Two new facts.",
        ),
        supersede_tokyo,
        tools(call("core_memory_update", label="human", content="Lives in Osaka (since 2024-10). Works at a bakery.")),
        text("Stored the move and the job, superseded Tokyo, rewrote human."),
    )
    with client.websocket_connect(f"{base}/ws") as ws:
        handed = client.post(messages_url(agent), json={"messages": MOVE, "memory_pass": True})
        assert handed.status_code == 201, handed.text
        pass_id = handed.json()["memory_pass_id"]
        turn = finished_pass(client, agent, pass_id)
        streamed: list[dict[str, Any]] = []
        while not streamed or streamed[-1]["type"] != "turn_completed":
            event = ws.receive_json()
            if event["turn_id"] == pass_id:
                streamed.append(event)

    # Replayed as it was streamed; a turn of its own kind that says what it went over.
    assert turn["status"] == "completed" and turn["stop_reason"] == "end_turn"
    assert streamed == turn["events"]
    started = turn["events"][0]
    assert (started["type"], started["kind"]) == ("turn_started", "memory_pass")
    assert started["message"] == "memory pass over 3 message(s) said on 2024-10-01"
    assert turn["reply"] == "Stored the move and the job, superseded Tokyo, rewrote human."
    assert turn["usage"]["llm_calls"] == 4
    results = [e for e in turn["events"] if e["type"] == "tool_result"]
    assert [r["name"] for r in results] == [
        "archival_memory_create",
        "archival_memory_create",
        "archival_memory_supersede",
        "core_memory_update",
    ]
    assert all(r["ok"] for r in results), results

    # The LLM was offered memory tools only, and read the conversation dated and core memory.
    first = llm.requests[0]
    assert sorted(t["function"]["name"] for t in first["tools"]) == [
        "archival_memory_create",
        "archival_memory_search",
        "archival_memory_supersede",
        "core_memory_update",
    ]
    assert "[2024-10-01 09:00] user: I moved from Tokyo to Osaka last week." in first["messages"][1]["content"]
    assert "Lives in Tokyo." in first["messages"][0]["content"]

    # Memory after the pass: the block rewritten (by the pass, in its history), facts stored dated, Tokyo superseded.
    assert block_value(client, agent, "human") == "Lives in Osaka (since 2024-10). Works at a bakery."
    revision = client.get(f"{base}/memory/human/history").json()["items"][0]  # newest first
    assert (revision["source"], revision["turn_id"]) == ("agent", pass_id)
    current = {p["content"]: p for p in client.get(f"{base}/archival").json()["items"]}
    assert set(current) == {"The user lives in Osaka.", "The user works at a bakery in Osaka."}
    assert all(at(p["occurred_at"]) == datetime(2024, 10, 1, tzinfo=UTC) for p in current.values())
    old = client.get(f"{base}/archival/{tokyo['id']}").json()
    assert old["superseded_by"] == current["The user lives in Osaka."]["id"]
    as_of_2020 = client.get(f"{base}/archival", params={"as_of": "2020-01-01"}).json()["items"]
    assert [p["content"] for p in as_of_2020] == ["The user lives in Tokyo."]

    # The next pass starts after what this one went over: nothing new, no LLM call.
    llm.reset()
    again = client.post(f"{base}/memory-pass")
    assert again.status_code == 202, again.text
    idle = finished_pass(client, agent, again.json()["pass_id"])
    assert (idle["status"], idle["usage"]["llm_calls"], llm.requests) == ("completed", 0, [])

    # Export → import keeps what was handed in (still out of the context, still a retry's match) and how far the
    # passes went (the copy's next pass has nothing new either).
    forget_agents_named(client, "pass import")
    imported = client.post("/v1/agents/import", params={"name": "pass import"}, json=settled_export(client, agent["id"]))
    assert imported.status_code == 201, imported.text
    copy = imported.json()["agent"]
    assert client.get(f"/v1/agents/{copy['id']}/context").json()["messages"] == []
    assert client.post(messages_url(copy), json={"messages": MOVE}).json()["already_stored"] == 3
    idle_copy = finished_pass(client, copy, client.post(f"/v1/agents/{copy['id']}/memory-pass").json()["pass_id"])
    assert (idle_copy["status"], idle_copy["usage"]["llm_calls"], llm.requests) == ("completed", 0, [])


def test_a_pass_never_overwrites_an_edit_made_meanwhile(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    base = f"/v1/agents/{agent['id']}"
    client.put(f"{base}/memory/human", json={"value": "Name: Ken."})
    client.post(messages_url(agent), json={"messages": [{"role": "user", "content": "I have two cats."}]})

    def rewrite_from_the_admins_text(request: dict[str, Any]) -> dict[str, Any]:
        refused = last_tool_result(request)
        assert "was edited since you read it" in refused and "Name: Ken Sato." in refused, refused
        return tools(call("core_memory_update", label="human", content="Name: Ken Sato. Has two cats."))

    llm.reset(
        slow(tools(call("core_memory_update", label="human", content="Name: Ken. Has two cats.")), 1.0),
        rewrite_from_the_admins_text,
        text("done"),
    )
    pass_id = client.post(f"{base}/memory-pass").json()["pass_id"]
    deadline = time.monotonic() + 10
    while not llm.requests and time.monotonic() < deadline:  # the pass has read the block and asked its LLM
        time.sleep(0.01)
    assert client.put(f"{base}/memory/human", json={"value": "Name: Ken Sato."}).status_code == 200

    turn = finished_pass(client, agent, pass_id)
    refused, rewritten = [e for e in turn["events"] if e["type"] == "tool_result"]
    assert not refused["ok"] and rewritten["ok"]
    assert block_value(client, agent, "human") == "Name: Ken Sato. Has two cats."


def test_passes_every_n_turns_never_delay_a_turn(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    # A generous LLM timeout: the held answer must outlast a whole turn on a busy machine.
    every_two = scripted_settings(settings.database_url or "", llm, memory_pass_every_turns=2, llm_timeout_seconds=60)
    with checked_client(create_app(every_two, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "passes every two turns"}).json()
        base = f"/v1/agents/{agent['id']}"
        llm.reset(tools(call("send_message", text="one")))
        chat(client, agent, "I like tea.")
        assert len(llm.requests) == 1  # one turn: no pass yet

        # The second turn queues a pass; its LLM holds its answer, and a turn asked meanwhile does not wait for it.
        answer = threading.Event()
        llm.reset(
            tools(call("send_message", text="two")),
            held(text("nothing worth keeping"), answer),
            tools(call("send_message", text="three")),
        )
        with client.websocket_connect(f"{base}/ws") as ws:
            chat(client, agent, "I also like coffee.")
            started = ws.receive_json()
            while started["type"] != "turn_started" or started.get("kind") != "memory_pass":
                started = ws.receive_json()
        deadline = time.monotonic() + 10
        while len(llm.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (
            "[" in llm.requests[1]["messages"][1]["content"]
            and "I also like coffee." in llm.requests[1]["messages"][1]["content"]
        )
        assert chat(client, agent, "And water.")["reply"] == "three"
        assert client.get(f"{base}/turns/{started['turn_id']}").json()["status"] == "running"
        answer.set()

        done = finished_pass(client, agent, started["turn_id"])
        assert (done["stop_reason"], done["reply"]) == ("end_turn", "nothing worth keeping")


def test_without_an_llm_a_pass_is_refused_before_anything_is_stored(database_url: str, embedder: Embedder) -> None:
    bare = Settings(database_url=database_url, openai_base_url=None, openai_api_key=None, llm_model=None)
    with checked_client(create_app(bare, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "no llm, no pass"}).json()
        refused = client.post(messages_url(agent), json={"messages": MOVE, "memory_pass": True})
        assert refused.status_code == 503 and "no LLM is configured" in refused.json()["detail"]
        assert client.get(messages_url(agent)).json()["items"] == []
        assert client.post(f"/v1/agents/{agent['id']}/memory-pass").status_code == 503
        # Handing in alone needs no LLM.
        assert client.post(messages_url(agent), json={"messages": MOVE}).json()["stored"] == 3
