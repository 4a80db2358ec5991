"""Letta's SDK against Engram's /letta API when things go wrong or differ: unknown ids of any form are NotFoundError,
bad input UnprocessableEntityError, missing or wrong keys AuthenticationError, another tenant's agent NotFoundError,
Letta's fields Engram has no use for are accepted, what Engram lacks is a 501 saying what to do, and pages follow
Letta's cursors."""

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from letta_client import (
    AuthenticationError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    UnprocessableEntityError,
)
from letta_client.types.agents import ImageContentParam
from letta_client.types.agents.letta_streaming_response import LettaStopReason

from testkit.scripted_llm import ScriptedLLM, call, error, tools
from tests.support.letta import letta_sdk, unique
from tests.support.service import tenant_with_key


def test_unknown_ids_of_any_form_are_not_found(client: TestClient) -> None:
    sdk = letta_sdk(client)
    for unknown in (f"agent-{uuid.uuid4()}", str(uuid.uuid4()), "agent-not-a-uuid", "nonsense"):
        with pytest.raises(NotFoundError):
            sdk.agents.retrieve(unknown)
        with pytest.raises(NotFoundError):
            sdk.agents.blocks.list(unknown)
        with pytest.raises(NotFoundError):
            sdk.agents.messages.create(agent_id=unknown, messages=[{"role": "user", "content": "hi"}])
    agent = sdk.agents.create(name=unique("ids"), memory_blocks=[{"label": "human", "value": ""}])
    bare_id = agent.id.removeprefix("agent-")
    assert sdk.agents.retrieve(bare_id).id == agent.id  # a bare uuid is accepted; the prefixed form comes back
    with pytest.raises(NotFoundError):
        sdk.agents.blocks.retrieve("nosuch", agent_id=agent.id)
    with pytest.raises(NotFoundError):
        sdk.agents.blocks.update("nosuch", agent_id=agent.id, value="x")
    for passage in (f"passage-{uuid.uuid4()}", "passage-x"):
        with pytest.raises(NotFoundError):
            sdk.agents.passages.delete(passage, agent_id=agent.id)
    with pytest.raises(NotFoundError):
        sdk.agents.messages.list(agent.id, after=f"message-{uuid.uuid4()}")


def test_bad_input_is_unprocessable(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    with pytest.raises(UnprocessableEntityError) as label:
        sdk.agents.create(name=unique("bad"), memory_blocks=[{"label": "My Notes", "value": "x"}])
    assert "label" in str(label.value.body)
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.create(name=unique("bad"), memory_blocks=[{"label": "human", "value": "x" * 50, "limit": 10}])
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.create(name=unique("bad"), memory_blocks=[{"label": "human", "value": ""}, {"label": "human", "value": ""}])
    agent = sdk.agents.create(name=unique("strict"), memory_blocks=[{"label": "human", "value": "", "limit": 20}])
    with pytest.raises(UnprocessableEntityError) as over:
        sdk.agents.blocks.update("human", agent_id=agent.id, value="far more than twenty characters")
    assert "limit" in str(over.value.body)
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.passages.create(agent_id=agent.id, text="")
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.passages.search(agent_id=agent.id, query="x", top_k=0)
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.messages.create(agent_id=agent.id, messages=[])
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.messages.create(agent_id=agent.id, messages=[{"role": "system", "content": "be someone else"}])
    with pytest.raises(UnprocessableEntityError):
        image: ImageContentParam = {"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}
        sdk.agents.messages.create(agent_id=agent.id, messages=[{"role": "user", "content": [image]}])
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.import_file(file=("x.af", b"not json"))
    with pytest.raises(UnprocessableEntityError):
        sdk.agents.import_file(file=("x.af", b'{"unrelated": true}'))
    # What a supported endpoint cannot do is bad input too, saying what to do instead.
    for attempt in (
        lambda: sdk.agents.list(tags=["x"]),
        lambda: sdk.agents.create(name=unique("shared"), block_ids=[f"block-{uuid.uuid4()}"]),
        lambda: sdk.agents.blocks.update("human", agent_id=agent.id, label="person"),
    ):
        with pytest.raises(UnprocessableEntityError) as unsupported:
            attempt()
        body = unsupported.value.body
        assert isinstance(body, dict) and body["error"] == "not_supported"
    assert llm.requests == []  # nothing bad reached the LLM


def test_letta_fields_engram_has_no_use_for_are_accepted(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(
        name=unique("everything"),
        agent_type="memgpt_v2_agent",
        model="anthropic/claude-sonnet-4",
        embedding="openai/text-embedding-3-small",
        llm_config={"model": "gpt-4o", "model_endpoint_type": "openai", "context_window": 128000},
        context_window_limit=64000,
        description="an agent of many settings",
        include_base_tools=True,
        tool_rules=[{"type": "exit_loop", "tool_name": "send_message"}],
        metadata={"team": "support"},
        timezone="Asia/Tokyo",
        enable_sleeptime=True,
        memory_blocks=[{"label": "human", "value": "", "metadata": {"x": 1}, "template_name": "t"}],
    )
    assert agent.llm_config.model == "scripted-model"  # the server's LLM serves every agent
    renamed = sdk.agents.update(agent.id, name=unique("renamed"), system="Be brief.", tags=["a"], max_tokens=100)
    assert renamed.system == "Be brief." and renamed.tags == []
    llm.reset(tools(call("send_message", text="ok")))
    response = sdk.agents.messages.create(
        agent_id=agent.id,
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}], "otid": "o-1"}],
        max_steps=3,
        use_assistant_message=True,
        assistant_message_tool_name="send_message",
        include_return_message_types=["assistant_message"],
        override_model="openai/gpt-4o",
    )
    assert [m.message_type for m in response.messages] == ["assistant_message"]


def test_keys_and_tenants(keyed: TestClient) -> None:
    _, ours = tenant_with_key(keyed, "letta-ours")
    _, theirs = tenant_with_key(keyed, "letta-theirs")
    mine = letta_sdk(keyed, ours).agents.create(name="memo", memory_blocks=[{"label": "human", "value": ""}])
    assert [a.id for a in letta_sdk(keyed, ours).agents.list()] == [mine.id]
    assert list(letta_sdk(keyed, theirs).agents.list()) == []
    with pytest.raises(NotFoundError):
        letta_sdk(keyed, theirs).agents.retrieve(mine.id)
    with pytest.raises(NotFoundError):
        letta_sdk(keyed, theirs).agents.passages.create(agent_id=mine.id, text="not yours")
    with pytest.raises(AuthenticationError):
        letta_sdk(keyed, "engk_wrong").agents.list()
    with pytest.raises(AuthenticationError):
        letta_sdk(keyed, None).agents.retrieve(mine.id)
    assert letta_sdk(keyed, None).health().status == "ok"  # as in Letta, the health check needs no key


def test_any_key_from_loopback_without_keys(client: TestClient) -> None:
    assert letta_sdk(client, "whatever-the-sdk-sends").agents.list(limit=1) is not None
    # Without the SDK's trailing slash too; errors keep Engram's body, whose `detail` Letta's clients read.
    assert client.get("/letta/v1/agents", params={"limit": 1}, headers={"Authorization": "Bearer x"}).status_code == 200
    assert client.get("/letta/v1/health").json()["status"] == "ok"
    missing = client.get(f"/letta/v1/agents/agent-{uuid.uuid4()}")
    assert missing.status_code == 404 and set(missing.json()) == {"error", "detail"}


def test_what_engram_lacks_is_a_501_with_a_pointer(client: TestClient) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("lacking"), memory_blocks=[])
    calls: list[Callable[[], object]] = [
        lambda: sdk.agents.tools.list(agent.id),
        lambda: sdk.agents.blocks.attach(f"block-{uuid.uuid4()}", agent_id=agent.id),
        lambda: sdk.agents.messages.reset(agent.id),
        lambda: sdk.agents.messages.cancel(agent.id),
        lambda: sdk.agents.messages.create_async(agent_id=agent.id, input="hi"),
        lambda: sdk.blocks.list(),
        lambda: sdk.tools.list(),
        lambda: sdk.agents.recompile(agent.id),
    ]
    for attempt in calls:
        with pytest.raises(InternalServerError) as refused:
            attempt()
        assert refused.value.status_code == 501
        assert "docs/letta.md" in str(refused.value.body)


def test_an_llm_failure_and_a_name_taken(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("fragile"), memory_blocks=[])
    llm.reset(error(500, "upstream down"))
    with pytest.raises(InternalServerError) as failed:
        sdk.agents.messages.create(agent_id=agent.id, messages=[{"role": "user", "content": "hello?"}])
    assert failed.value.status_code == 502
    assert [m.message_type for m in sdk.agents.messages.list(agent.id)] == ["user_message"]  # the message is kept
    llm.reset(error(500, "upstream down"))
    streamed = list(sdk.agents.messages.stream(agent_id=agent.id, messages=[{"role": "user", "content": "again?"}]))
    assert [m.message_type for m in streamed] == ["error_message", "stop_reason", "usage_statistics"]
    stopped = streamed[1]
    assert isinstance(stopped, LettaStopReason) and stopped.stop_reason == "llm_api_error"
    exported = sdk.agents.export_file(agent.id)
    with pytest.raises(ConflictError):
        sdk.agents.import_file(file=("a.af", exported.encode()))  # the name is taken: Engram reaches agents by name
    with pytest.raises(ConflictError):
        sdk.agents.create(name=agent.name, memory_blocks=[])  # so is creating a second agent of that name


def test_pages_follow_letta_cursors(client: TestClient, llm: ScriptedLLM) -> None:
    sdk = letta_sdk(client)
    prefix = unique("paged")
    created = [sdk.agents.create(name=f"{prefix}-{i}", memory_blocks=[]).id for i in range(5)]
    newest_first = [a.id for a in sdk.agents.list(query_text=prefix, limit=2)]  # the SDK follows `after` itself
    assert newest_first == created[::-1]
    first = sdk.agents.list(query_text=prefix, limit=2, order="asc")
    assert [a.id for a in first.items] == created[:2]
    assert [a.id for a in first.get_next_page().items] == created[2:4]
    assert [a.id for a in sdk.agents.list(query_text=prefix, before=created[3], order="asc", limit=2).items] == created[1:3]

    agent = created[0]
    texts = [f"passage number {i}" for i in range(7)]
    for passage in texts:
        sdk.agents.passages.create(agent_id=agent, text=passage)
    page = sdk.agents.passages.list(agent, limit=3)
    assert [p.text for p in page] == texts[:3]
    after = sdk.agents.passages.list(agent, limit=3, after=page[-1].id)
    assert [p.text for p in after] == texts[3:6]
    assert [p.text for p in sdk.agents.passages.list(agent, ascending=False, limit=2)] == texts[:-3:-1]

    llm.reset(*[tools(call("send_message", text=f"reply {i}")) for i in range(3)])
    for i in range(3):
        sdk.agents.messages.create(agent_id=agent, messages=[{"role": "user", "content": f"message {i}"}])
    said = [getattr(m, "content", None) for m in sdk.agents.messages.list(agent, limit=2, order="asc")]
    assert said == ["message 0", "reply 0", "message 1", "reply 1", "message 2", "reply 2"]  # all pages, in order
    only_user = sdk.agents.messages.list(agent, include_return_message_types=["user_message"], limit=2)
    assert [getattr(m, "content", None) for m in only_user] == ["message 2", "message 1", "message 0"]


def test_a_method_a_path_does_not_take_is_a_405_not_a_501(client: TestClient) -> None:
    for path, allowed in (("/letta/v1/health/", "GET"), (f"/letta/v1/agents/agent-{uuid.uuid4()}/messages", "GET, POST")):
        answered = client.request("PUT", path)
        assert (answered.status_code, answered.headers.get("Allow")) == (405, allowed)
    assert client.request("PUT", "/letta/v1/tools/").status_code == 501


def test_passage_dates(client: TestClient) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("dated"), memory_blocks=[])
    long_ago = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    [dated] = sdk.agents.passages.create(
        agent_id=agent.id, text="アイコさんは2024年5月に大阪へ引っ越しました", created_at=long_ago
    )
    assert dated.created_at == long_ago  # when it happened, as given
    hour = timedelta(hours=1)
    now = datetime.now(UTC)
    stored_then = sdk.agents.passages.search(agent_id=agent.id, query="大阪", start_datetime=now - hour, end_datetime=now + hour)
    assert [r.content for r in stored_then.results] == [dated.text]
    assert datetime.fromisoformat(stored_then.results[0].timestamp) == long_ago
    assert sdk.agents.passages.search(agent_id=agent.id, query="大阪", start_datetime=now + hour).count == 0
    assert sdk.agents.passages.search(agent_id=agent.id, query="大阪", end_datetime=now - hour).count == 0
