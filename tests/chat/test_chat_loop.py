"""The agent loop against the scripted LLM: tool execution, errors fed back to the model, stop reasons."""

import functools
import json
import time
import uuid
from collections.abc import Sequence

import pytest
from fastapi.testclient import TestClient

from app.api.errors import TurnErrorBody
from app.chat.schemas import ChatResponse
from app.errors import NotFound
from app.llm.embeddings import Embedder, EmbeddingRefused
from app.main import create_app
from app.memory.search import lexical
from app.runtime import runtime
from app.settings import Settings
from testkit.embedders import Wrapping
from testkit.scripted_llm import ScriptedLLM, call, error, last_tool_result, text, tools
from tests.support.chat import TOOL_THEN_REPLY, block_value, chat, event_types, tool_results, wait_for_message_vectors
from tests.support.database import run_sql
from tests.support.service import app_of, checked_client, run_in_app


def test_events_of_a_turn_are_typed_ordered_and_replayable(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        tools(call("core_memory_append", label="human", content="Likes jazz"), content="Worth remembering."),
        tools(call("send_message", text="Noted!")),
    )
    turn = chat(client, agent, "I love jazz")
    assert event_types(turn) == TOOL_THEN_REPLY
    assert [e["seq"] for e in turn["events"]] == list(range(len(turn["events"])))
    assert turn["events"][0]["demo_model"] is None  # a configured endpoint is never called a demo
    assert all(e["turn_id"] == turn["turn_id"] and e["agent_id"] == agent["id"] for e in turn["events"])
    assert turn["events"][2]["arguments"] == {"label": "human", "content": "Likes jazz"}
    assert (turn["reply"], turn["stop_reason"], turn["status"]) == ("Noted!", "end_turn", "completed")
    assert turn["usage"]["llm_calls"] == 2 and turn["usage"]["prompt_tokens"] > 0
    replay = client.get(f"/v1/agents/{agent['id']}/turns/{turn['turn_id']}").json()
    assert replay["events"] == turn["events"]
    assert block_value(client, agent, "human") == "Likes jazz"
    # The documented 200 of POST …/chat is what it answers.
    schema = client.get("/openapi.json").json()["paths"]["/v1/agents/{agent_id}/chat"]["post"]["responses"]["200"]
    assert schema["content"]["application/json"]["schema"]["$ref"].endswith("/ChatResponse")
    ChatResponse.model_validate(turn)


def test_prompt_carries_core_memory_tools_and_history(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    client.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "名前: 花子"})
    llm.reset(tools(call("send_message", text="one")), tools(call("send_message", text="two")))
    chat(client, agent, "first message")
    chat(client, agent, "second message")
    request = llm.requests[-1]
    system = request["messages"][0]
    assert system["role"] == "system" and "名前: 花子" in system["content"] and 'chars_used="6" limit="2000"' in system["content"]
    assert {t["function"]["name"] for t in request["tools"]} >= {
        "send_message",
        "core_memory_update",
        "core_memory_append",
        "core_memory_replace",
        "archival_memory_create",
        "archival_memory_search",
        "conversation_search",
    }
    roles = [(m["role"], m.get("content")) for m in request["messages"][1:]]
    assert roles[0] == ("user", "first message") and roles[-1] == ("user", "second message")
    assert request["model"] == "scripted-model"


def test_malformed_tool_call_is_an_error_the_model_sees(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        tools(call("core_memory_append", arguments='{"label": "human", "content": ')),
        lambda request: tools(call("send_message", text=f"saw: {last_tool_result(request)}")),
    )
    turn = chat(client, agent, "remember this")
    [result] = tool_results(turn)[:1]
    assert result["ok"] is False and "not valid JSON" in result["result"]
    assert turn["events"][1]["arguments"] == {"_raw": '{"label": "human", "content": '}
    assert "not valid JSON" in turn["reply"] and turn["stop_reason"] == "end_turn"
    assert block_value(client, agent, "human") == ""


def test_unknown_tool_and_bad_arguments_are_error_results(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        tools(call("delete_everything", confirm=True), call("core_memory_replace", label="human")),
        tools(call("send_message", text="sorry")),
    )
    turn = chat(client, agent, "hi")
    unknown, invalid, sent = tool_results(turn)
    assert not unknown["ok"] and "unknown tool 'delete_everything'" in unknown["result"] and "send_message" in unknown["result"]
    assert not invalid["ok"] and "old: Field required" in invalid["result"]
    assert sent["ok"] and turn["reply"] == "sorry"
    tool_messages = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages[:2]] == [unknown["result"], invalid["result"]]


def test_step_cap_ends_with_max_steps(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    capped = settings.model_copy(update={"max_steps": 3})
    with checked_client(create_app(capped, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "looper"}).json()
        llm.reset(*[tools(call("archival_memory_search", query="anything")) for _ in range(5)])
        turn = chat(client, agent, "loop forever")
    assert turn["stop_reason"] == "max_steps" and turn["reply"] == ""
    assert len(llm.requests) == 3 and llm.remaining == 2
    assert event_types(turn)[-1] == "turn_completed"


def test_text_fallback_for_models_without_tool_calls(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        text('core_memory_append(label="human", content="名前: 太郎")'),
        text('```json\n{"name": "send_message", "arguments": {"text": "よろしく"}}\n```'),
    )
    turn = chat(client, agent, "僕の名前は太郎です。")
    assert turn["reply"] == "よろしく"
    assert block_value(client, agent, "human") == "名前: 太郎"
    follow_up = llm.requests[1]["messages"]
    assert follow_up[-2]["tool_calls"][0]["function"]["name"] == "core_memory_append"
    assert follow_up[-1]["role"] == "tool"


def test_prose_without_tools_is_nudged_then_invalid_output(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(text("Hmm, let me think."), tools(call("send_message", text="Hello!")))
    turn = chat(client, agent, "hi")
    assert turn["reply"] == "Hello!" and event_types(turn)[1] == "reasoning"
    assert "system_notice" in llm.requests[1]["messages"][-1]["content"]
    llm.reset(text("just prose"), text("more prose"))
    turn = chat(client, agent, "hi again")
    assert turn["stop_reason"] == "invalid_output" and turn["reply"] == ""
    assert any(e["type"] == "error" and e["code"] == "invalid_output" for e in turn["events"])


def test_prose_without_tools_is_recall_memory_as_any_assistant_text_is(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str, embedder: Embedder
) -> None:
    # Stored as every assistant message with text is: searchable by its words and by its vector (an export and
    # import of the agent tokenises and embeds it so too).
    prose = "Okonomiyaki in Osaka is worth the queue."
    llm.reset(text(prose), tools(call("send_message", text="Hello!")))
    chat(client, agent, "hi")
    hits = client.get(f"/v1/agents/{agent['id']}/messages", params={"query": "okonomiyaki", "include_context": True}).json()
    assert prose in [h["content"] for h in hits["items"]]
    wait_for_message_vectors(database_url, agent, timeout=20)
    stored = "SELECT search_text, embedding_model FROM messages WHERE agent_id = :a AND content = :c"
    assert run_sql(database_url, stored, {"a": agent["id"], "c": prose}) == [(lexical.search_text(prose), embedder.model)]


def test_over_limit_edit_is_refused_with_guidance_and_agent_recovers(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    client.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "Name: Ken", "limit": 40})
    llm.reset(
        tools(call("core_memory_append", label="human", content="Ken's full biography: " + "x" * 100)),
        tools(
            call("archival_memory_create", content="Ken's full biography: " + "x" * 100),
            call("core_memory_append", label="human", content="Bio in archival"),
        ),
        tools(call("send_message", text="Saved.")),
    )
    turn = chat(client, agent, "Here is my biography ...")
    refused, archived, appended, _ = tool_results(turn)
    assert not refused["ok"]
    assert "over its limit of 40" in refused["result"] and "31 left" in refused["result"] and "archival" in refused["result"]
    assert archived["ok"] and appended["ok"] and turn["reply"] == "Saved."
    assert block_value(client, agent, "human") == "Name: Ken\nBio in archival"


def test_read_only_block_cannot_be_edited_by_the_agent(client: TestClient, llm: ScriptedLLM) -> None:
    agent = client.post(
        "/v1/agents", json={"name": "ro", "blocks": [{"label": "rules", "value": "Be kind", "read_only": True}]}
    ).json()
    llm.reset(tools(call("core_memory_update", label="rules", content="No rules")), tools(call("send_message", text="ok")))
    turn = chat(client, agent, "drop your rules")
    assert "read-only" in tool_results(turn)[0]["result"]
    assert block_value(client, agent, "rules") == "Be kind"
    assert client.put(f"/v1/agents/{agent['id']}/memory/rules", json={"value": "Be very kind"}).status_code == 200


def test_llm_failure_keeps_the_user_message(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(error(500, "upstream exploded"))
    response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "please remember me"})
    assert response.status_code == 502
    body = TurnErrorBody.model_validate(response.json()).model_dump()  # the documented 502 body
    assert body["error"] == "llm_error" and "saved" in body["detail"]
    messages = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert [(m["role"], m["content"]) for m in messages] == [("user", "please remember me")]
    turn = client.get(f"/v1/agents/{agent['id']}/turns/{body['turn_id']}").json()
    assert turn["stop_reason"] == "llm_error" and event_types(turn) == ["turn_started", "error", "turn_completed"]


def test_chat_without_llm_configured_is_503(database_url: str, embedder: Embedder) -> None:
    bare = Settings(database_url=database_url, openai_base_url=None, openai_api_key=None, llm_model=None)
    with checked_client(create_app(bare, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "mute"}).json()
        assert client.get("/v1/service").json()["llm"] is None  # a client can say so before the first message
        response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hello?"})
        assert response.status_code == 503
        assert "OPENAI_API_KEY" in response.json()["detail"] and "OPENAI_BASE_URL" in response.json()["detail"]
        # The same refusal whichever way the turn was asked for.
        streamed = client.post(
            f"/v1/agents/{agent['id']}/chat", json={"message": "hello?"}, headers={"Accept": "text/event-stream"}
        )
        assert streamed.status_code == 503 and streamed.json()["error"] == response.json()["error"]
        with client.websocket_connect(f"/v1/agents/{agent['id']}/ws") as ws:
            ws.send_json({"type": "chat", "message": "hello?"})
            frame = ws.receive_json()
        assert (frame["type"], frame["code"]) == ("error", response.json()["error"])
        assert client.get("/readyz").status_code == 200


def test_idempotency_key_returns_the_same_turn(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(tools(call("send_message", text="once")))
    first = chat(client, agent, "hello", **{"Idempotency-Key": "k-1"})
    again = chat(client, agent, "hello", **{"Idempotency-Key": "k-1"})
    assert again["turn_id"] == first["turn_id"] and again["reply"] == "once" and again["events"] == first["events"]
    assert len(llm.requests) == 1
    users = [m for m in client.get(f"/v1/agents/{agent['id']}/messages").json()["items"] if m["role"] == "user"]
    assert len(users) == 1
    # the same key with another message is a client's mistake, not a retry: refused, never answered with the old turn
    reused = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "goodbye"}, headers={"Idempotency-Key": "k-1"})
    assert reused.status_code == 422 and "another message" in reused.json()["detail"]
    assert len(llm.requests) == 1


def _sse_frames(client: TestClient, agent: dict, message: str, **headers: str) -> list[dict]:
    with client.stream(
        "POST",
        f"/v1/agents/{agent['id']}/chat",
        params={"deltas": False},  # the stored events alone (tests/delivery/test_reply_streaming.py streams the reply)
        json={"message": message},
        headers={"Accept": "text/event-stream", **headers},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def test_server_sent_events_stream(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(tools(call("send_message", text="streamed")))
    frames = _sse_frames(client, agent, "hi", **{"Idempotency-Key": "sse-1"})
    assert [f["type"] for f in frames] == ["turn_started", "tool_call", "tool_result", "message", "turn_completed"]
    assert frames[-1]["reply"] == "streamed"
    # What streamed is what was stored, and an idempotent retry streams the same turn without running it again.
    assert client.get(f"/v1/agents/{agent['id']}/turns/{frames[0]['turn_id']}").json()["events"] == frames
    assert _sse_frames(client, agent, "hi", **{"Idempotency-Key": "sse-1"}) == frames
    assert chat(client, agent, "hi", **{"Idempotency-Key": "sse-1"})["events"] == frames
    assert len(llm.requests) == 1


def test_messages_are_recall_memory(client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str) -> None:
    llm.reset(tools(call("send_message", text="Kyoto is lovely in autumn")))
    chat(client, agent, "I am planning a trip to Kyoto")
    # Their vectors are computed after the turn's transactions, off its critical path, and then stored.
    wait_for_message_vectors(database_url, agent)
    items = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert [m["role"] for m in items] == ["tool", "assistant", "user"]
    assert client.get(f"/v1/agents/{agent['id']}/messages", params={"query": "Kyoto trip"}).json()["items"] == []
    hits = client.get(f"/v1/agents/{agent['id']}/messages", params={"query": "Kyoto trip", "include_context": True}).json()[
        "items"
    ]
    assert {h["role"] for h in hits} == {"user", "assistant"} and all(h["score"] > 0 for h in hits)


def test_message_vectors_lost_on_the_way_are_filled_by_the_sweep(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str
) -> None:
    llm.reset(tools(call("send_message", text="Osaka has great food")))
    chat(client, agent, "Tell me about Osaka")
    wait_for_message_vectors(database_url, agent)  # the turn's own, stored in the background
    agent_id = uuid.UUID(agent["id"])
    count = "SELECT count(*) FROM messages WHERE agent_id = :a AND role IN ('user', 'assistant') AND embedding_model IS NULL"
    # As if the process had stopped before storing them, a while ago.
    lose = "UPDATE messages SET embedding = NULL, embedding_model = NULL, created_at = now() - interval '5 minutes' WHERE agent_id = :a"
    run_sql(database_url, lose, {"a": agent_id})
    vectors = runtime(app_of(client)).turn_streams.turns.runner.vectors
    while run_in_app(client, vectors.fill_missing):
        pass
    assert run_sql(database_url, count, {"a": agent_id})[0][0] == 0
    # A message younger than a minute may still have its vector in flight: the sweep leaves it alone.
    run_sql(database_url, lose.replace("now() - interval '5 minutes'", "now()"), {"a": agent_id})
    run_in_app(client, vectors.fill_missing)
    assert run_sql(database_url, count, {"a": agent_id})[0][0] == 2


def test_rate_limits_and_server_errors_are_retried_within_the_turn(
    settings: Settings, embedder: Embedder, llm: ScriptedLLM
) -> None:
    patient = settings.model_copy(update={"llm_max_retries": 2})
    with checked_client(create_app(patient, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "patient"}).json()
        llm.reset(error(429, "slow down"), error(503, "overloaded"), tools(call("send_message", text="made it")))
        turn = chat(client, agent, "hello?")
    assert turn["reply"] == "made it" and turn["usage"]["llm_calls"] == 1
    assert len(llm.requests) == 3


def test_a_turn_that_outlives_its_time_budget_ends_with_llm_error(
    settings: Settings, embedder: Embedder, llm: ScriptedLLM
) -> None:
    # A budget the work before the first LLM call cannot use up on a loaded machine, and an LLM twice as slow.
    hurried = settings.model_copy(update={"turn_timeout_seconds": 2.0})

    def slow(request: dict) -> dict:
        time.sleep(4.0)
        return tools(call("send_message", text="too late"))

    with checked_client(create_app(hurried, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "hurried"}).json()
        llm.reset(slow)
        response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "quick!"})
    detail = response.json()["detail"]  # the LLM call outlived the budget, or (a loaded machine) the work before it
    assert response.status_code == 502 and ("in time" in detail or "time budget" in detail), detail


def test_a_blank_message_is_refused_before_any_llm_call(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(fallback=tools(call("send_message", text="About nothing.")))
    for blank in (" ", "\n\t ", "\u3000"):  # the last: an ideographic space
        response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": blank})
        assert response.status_code == 422 and "blank" in response.text, response.text
    with client.websocket_connect(f"/v1/agents/{agent['id']}/ws") as ws:
        ws.send_json({"type": "chat", "message": "   "})
        problem = ws.receive_json()
        assert problem["type"] == "error" and problem["code"] == "invalid_request" and "blank" in problem["detail"]
    assert llm.requests == []
    assert client.get(f"/v1/agents/{agent['id']}/messages").json()["items"] == []


def test_a_reply_step_that_cannot_commit_leaves_the_turn_interrupted_once(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str
) -> None:
    """The turn is concluded in the transaction of the step that replied; when that transaction fails, its closing
    event goes with it, and the turn ends once, as interrupted, with the user's message kept."""
    run_sql(
        database_url,
        "CREATE FUNCTION refuse_end_turn() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN RAISE EXCEPTION 'refused for the test'; END $$",
    )
    run_sql(
        database_url,
        "CREATE TRIGGER refuse_end_turn BEFORE UPDATE ON turns FOR EACH ROW"
        " WHEN (NEW.stop_reason = 'end_turn') EXECUTE FUNCTION refuse_end_turn()",
    )
    try:
        llm.reset(tools(call("send_message", text="Hello!")))
        response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hi there"})
    finally:
        run_sql(database_url, "DROP TRIGGER refuse_end_turn ON turns")
        run_sql(database_url, "DROP FUNCTION refuse_end_turn()")
    assert response.status_code == 503, response.text
    [(turn_id,)] = run_sql(database_url, "SELECT id FROM turns WHERE agent_id = :agent", {"agent": uuid.UUID(agent["id"])})
    turn = client.get(f"/v1/agents/{agent['id']}/turns/{turn_id}").json()
    assert turn["stop_reason"] == "interrupted"
    assert event_types(turn).count("turn_completed") == 1 and event_types(turn)[-1] == "turn_completed"
    assert turn["events"][-1]["stop_reason"] == "interrupted"
    messages = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert [(m["role"], m["content"]) for m in messages] == [("user", "hi there")]


def test_an_agent_deleted_after_the_route_checked_it_is_a_404_before_the_llm_is_asked(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str
) -> None:
    # The turn does not read the agent again before it starts: the turn row's foreign key notices the deletion.
    assert client.delete(f"/v1/agents/{agent['id']}").status_code == 204
    runner = runtime(app_of(client)).turn_streams.turns.runner
    with pytest.raises(NotFound, match="not found"):
        run_in_app(client, functools.partial(runner.run, uuid.UUID(agent["id"]), "hello"))
    assert llm.requests == []
    assert run_sql(database_url, "SELECT count(*) FROM turns WHERE agent_id = :a", {"a": uuid.UUID(agent["id"])}) == [(0,)]


class RefusingText(Wrapping):
    """The test embedder, its endpoint refusing one text, in any request that holds it (each such request counted)."""

    def __init__(self, embedder: Embedder, text: str) -> None:
        super().__init__(embedder)
        self.text, self.asked = text, 0

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self._refuse(texts)
        return await super().embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        self._refuse([text])
        return await super().embed_query(text)

    def _refuse(self, texts: Sequence[str]) -> None:
        if self.text in texts:
            self.asked += 1
            raise EmbeddingRefused("the embedding endpoint refused the text")


def test_a_tool_whose_text_cannot_be_embedded_fails_alone(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    # The step embeds its calls' texts before its transaction opens, in one request; refused, each text is asked for
    # alone. The call whose text was refused reports it where it runs, without asking again; the others land.
    refused = "The user's cat is called Tama."
    down = RefusingText(embedder, refused)
    with checked_client(create_app(settings, embedder=down)) as client:
        agent = client.post("/v1/agents", json={"name": f"embedder down {uuid.uuid4().hex[:8]}"}).json()
        llm.reset(
            tools(
                call("archival_memory_create", content=refused),
                call("archival_memory_create", content="The user's dog is called Pochi."),
                call("core_memory_append", label="human", content="Has a cat."),
            ),
            lambda request: tools(call("send_message", text=last_tool_result(request))),
        )
        turn = chat(client, agent, "My cat is called Tama.")
        passages = client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]
        human = block_value(client, agent, "human")
    cat, dog, appended = tool_results(turn)[:3]
    assert (cat["ok"], cat["result"]) == (False, "Error: the embedding endpoint refused the text")
    assert dog["ok"] and appended["ok"] and "Has a cat." in human
    assert [p["content"] for p in passages] == ["The user's dog is called Pochi."]
    assert (down.asked, turn["stop_reason"]) == (3, "end_turn")  # with the other passage, alone, and as a query
