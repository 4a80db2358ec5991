"""The official `openai` client pointed at Engram: `model` names an agent, the reply is its send_message, streaming
gives chat.completion.chunk events, errors come in OpenAI's shape, and keys work as Bearer tokens per tenant."""

import uuid

import openai
import pytest
from fastapi.testclient import TestClient

from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.chat import block_value
from tests.support.service import openai_client, tenant_with_key


def test_completion_runs_a_turn_of_the_named_agent(client: TestClient, llm: ScriptedLLM) -> None:
    agent = client.post("/v1/agents", json={"name": f"assistant-{uuid.uuid4().hex[:8]}"}).json()
    llm.reset(
        tools(call("core_memory_append", label="human", content="Name: Aiko")),
        tools(call("send_message", text="はじめまして、アイコさん！")),
    )
    sdk = openai_client(client)
    completion = sdk.chat.completions.create(
        model=agent["name"],
        messages=[
            {"role": "system", "content": "the client's own prompt: not stored"},
            {"role": "user", "content": "an earlier message the client kept"},
            {"role": "assistant", "content": "an earlier answer"},
            {"role": "user", "content": "私の名前はアイコです"},
        ],
        temperature=0.2,
    )
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "はじめまして、アイコさん！"
    assert completion.choices[0].finish_reason == "stop"
    assert (
        completion.usage
        and completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens > 0
    )
    # Only the last user message became the turn's message; the agent's memory changed through its tool.
    messages = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    user_texts = [m["content"] for m in messages if m["role"] == "user"]
    assert user_texts == ["私の名前はアイコです"]
    assert "Name: Aiko" in block_value(client, agent, "human")
    # The LLM saw the agent's own system prompt, not the client's.
    assert "the client's own prompt" not in str(llm.requests[0]["messages"])
    # By id too.
    llm.reset(tools(call("send_message", text="by id")))
    by_id = sdk.chat.completions.create(model=agent["id"], messages=[{"role": "user", "content": "hi"}])
    assert by_id.choices[0].message.content == "by id"


def test_streaming_completion_yields_chunks(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        tools(call("archival_memory_create", content="Aiko likes ramen")),
        tools(call("send_message", text="Noted."), call("send_message", text="Anything else?")),
    )
    stream = openai_client(client).chat.completions.create(
        model=agent["id"],
        messages=[{"role": "user", "content": [{"type": "text", "text": "I like ramen"}]}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert {c.object for c in chunks} == {"chat.completion.chunk"} and len({c.id for c in chunks}) == 1
    with_choices = [c for c in chunks if c.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    assert text == "Noted.\n\nAnything else?"
    assert with_choices[-1].choices[0].finish_reason == "stop"
    usage = chunks[-1]
    assert not usage.choices and usage.usage and usage.usage.completion_tokens > 0
    search = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "ramen"}).json()["items"]
    assert search[0]["content"] == "Aiko likes ramen"


def test_errors_come_in_openai_shape(client: TestClient, agent: dict) -> None:
    sdk = openai_client(client)
    with pytest.raises(openai.NotFoundError) as missing:
        sdk.chat.completions.create(model="no-such-agent", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.status_code == 404
    body = missing.value.body
    assert isinstance(body, dict) and body["code"] == "not_found" and "no-such-agent" in body["message"]
    assert body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as not_user:
        sdk.chat.completions.create(model=agent["id"], messages=[{"role": "assistant", "content": "hi"}])
    assert "last message must be the user's" in str(not_user.value.body)
    raw = client.post("/v1/chat/completions", json={"model": agent["id"], "messages": []})
    assert raw.status_code == 400 and set(raw.json()["error"]) == {"message", "type", "param", "code"}
    assert client.get("/v1/agents/not-a-uuid").json()["error"] == "invalid_request"  # other routes keep Engram's shape


def test_bearer_keys_and_models_per_tenant(keyed: TestClient, llm: ScriptedLLM) -> None:
    _, ours = tenant_with_key(keyed, "openai-ours")
    _, theirs = tenant_with_key(keyed, "openai-theirs")
    mine = keyed.post("/v1/agents", json={"name": "memo"}, headers={"Authorization": f"Bearer {ours}"}).json()
    listed = openai_client(keyed, ours).models.list()
    assert [m.id for m in listed.data] == [mine["id"]] and listed.data[0].name == "memo"  # type: ignore[attr-defined]  # Engram's own field: the SDK's Model keeps it undeclared
    assert openai_client(keyed, theirs).models.list().data == []
    with pytest.raises(openai.NotFoundError):
        openai_client(keyed, theirs).chat.completions.create(model=mine["id"], messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.AuthenticationError) as bad_key:
        openai_client(keyed, "engk_wrong").models.list()
    body = bad_key.value.body
    assert isinstance(body, dict) and body["type"] == "authentication_error"
    llm.reset(tools(call("send_message", text="hello")))
    reply = openai_client(keyed, ours).chat.completions.create(model="memo", messages=[{"role": "user", "content": "x"}])
    assert reply.choices[0].message.content == "hello"
