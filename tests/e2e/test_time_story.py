"""A fact through its life with the agent's own tools: stated, changed ("I moved from Tokyo to Osaka"), asked now and
as of before the change; and dates and validity through export, import and Letta files."""

import re
import time
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, last_tool_result, tools
from tests.support.chat import chat, reply_with_recalled_memories, tool_results
from tests.support.portability import settled_export
from tests.support.service import at, checked_client, forget_agents_named

RELATED = re.compile(r"- id ([0-9a-f-]{36}) \[(\d{4}-\d\d-\d\d)\] The user lives in Tokyo\.")


def passages(client: TestClient, agent: dict, **params: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/agents/{agent['id']}/archival", params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_a_move_supersedes_the_old_home_through_the_tools(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    with checked_client(create_app(settings, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "time story"}).json()
        llm.reset(
            tools(call("archival_memory_create", content="The user lives in Tokyo.")),
            tools(call("send_message", text="Tokyo, lovely!")),
        )
        chat(client, agent, "I live in Tokyo.")
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        assert f"(today's date: {today})" in llm.requests[0]["messages"][0]["content"]
        [tokyo] = passages(client, agent)
        time.sleep(0.01)
        before_move = datetime.now(UTC)
        time.sleep(0.01)

        def supersede_what_was_listed(request: dict[str, Any]) -> dict[str, Any]:
            # The model reads, in the result of its insert, the stored fact the new one is about, and supersedes it.
            listed = RELATED.search(last_tool_result(request))
            assert listed, last_tool_result(request)
            assert listed.group(2) == at(tokyo["occurred_at"]).strftime("%Y-%m-%d")
            return tools(call("archival_memory_supersede", passage_id=listed.group(1), content="The user lives in Osaka."))

        llm.reset(
            tools(call("archival_memory_create", content="The user lives in Osaka.")),
            supersede_what_was_listed,
            tools(call("send_message", text="Osaka it is!")),
        )
        moved = chat(client, agent, "I moved from Tokyo to Osaka.")
        created, superseded, _sent = tool_results(moved)
        assert created["ok"] and "archival_memory_supersede" in created["result"]
        assert superseded["ok"] and tokyo["id"] in superseded["result"]

        # One Osaka passage (the one just stored became the successor), the Tokyo one kept as history.
        everything = {p["content"]: p for p in passages(client, agent, include_superseded="true")}
        assert set(everything) == {"The user lives in Tokyo.", "The user lives in Osaka."}
        osaka, old = everything["The user lives in Osaka."], everything["The user lives in Tokyo."]
        assert old["superseded_by"] == osaka["id"] and at(old["valid_until"]) == at(osaka["occurred_at"]) > before_move

        question = "Where does the user live?"
        assert [p["content"] for p in passages(client, agent, query=question)] == ["The user lives in Osaka."]
        assert [p["content"] for p in passages(client, agent, query=question, as_of=before_move.isoformat())] == [
            "The user lives in Tokyo."
        ]

        # The agent's own search sees the current fact only, with its id and date.
        llm.reset(
            tools(call("archival_memory_search", query="where does the user live")),
            lambda request: tools(call("send_message", text=last_tool_result(request))),
        )
        searched = chat(client, agent, "Remind me where I live.")["reply"]
        assert f"id {osaka['id']} [{today}] The user lives in Osaka." in searched and "Tokyo" not in searched

        # Automatic recollection puts the current fact in the prompt, never the superseded one, even when asked by
        # the old fact's words (which find it, as history, with include_superseded).
        asked = "Where do I live now, Tokyo or Osaka?"
        assert "The user lives in Tokyo." in [
            p["content"] for p in passages(client, agent, query=asked, include_superseded="true")
        ]
        llm.reset(reply_with_recalled_memories)
        recalled = chat(client, agent, asked)["reply"]
        assert f"[{today}]\n- The user lives in Osaka." in recalled and "Tokyo" not in recalled

        # The tool refuses to supersede a fact twice, naming its successor.
        llm.reset(
            tools(call("archival_memory_supersede", passage_id=old["id"], content="The user lives in Kobe.")),
            tools(call("send_message", text="ok")),
        )
        again, _sent = tool_results(chat(client, agent, "Actually, scratch that."))
        assert not again["ok"] and osaka["id"] in again["result"]


def test_export_and_import_keep_dates_and_validity(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    tokyo = client.post(base, json={"content": "The user lives in Tokyo.", "occurred_at": "2019-04-01"}).json()
    osaka = client.post(
        f"{base}/{tokyo['id']}/supersede",
        json={"content": "The user lives in Osaka.", "occurred_at": "2024-10-01T09:00:00+09:00"},
    ).json()
    llm.reset(tools(call("send_message", text="Osaka has great food.")))
    chat(client, agent, "Osaka food is the best.")

    document = settled_export(client, agent["id"])
    by_content = {p["content"]: p for p in document["passages"]}
    assert by_content["The user lives in Tokyo."]["superseded_by"] == osaka["id"]
    assert at(by_content["The user lives in Tokyo."]["valid_until"]) == at(osaka["occurred_at"])
    assert all(m["occurred_at"] == m["created_at"] for m in document["messages"])
    # A message said long ago (dated by the importer) keeps that date.
    document["messages"][0]["occurred_at"] = "2024-10-02T08:00:00Z"

    forget_agents_named(client, "time import")
    response = client.post("/v1/agents/import", params={"name": "time import"}, json=document)
    assert response.status_code == 201, response.text
    copy = response.json()["agent"]
    imported = {p["content"]: p for p in passages(client, copy, include_superseded="true")}
    new_osaka, new_tokyo = imported["The user lives in Osaka."], imported["The user lives in Tokyo."]
    assert new_osaka["id"] != osaka["id"] and new_tokyo["superseded_by"] == new_osaka["id"]  # the new ids
    for content, original in (("The user lives in Tokyo.", tokyo), ("The user lives in Osaka.", osaka)):
        assert at(imported[content]["occurred_at"]) == at(original["occurred_at"])
        assert at(imported[content]["created_at"]) == at(original["created_at"])
    assert at(new_tokyo["valid_until"]) == at(osaka["occurred_at"])
    assert [p["content"] for p in passages(client, copy)] == ["The user lives in Osaka."]
    assert [p["content"] for p in passages(client, copy, as_of="2020-01-01")] == ["The user lives in Tokyo."]
    messages = client.get(f"/v1/agents/{copy['id']}/messages").json()["items"]
    assert at(messages[-1]["occurred_at"]) == datetime(2024, 10, 2, 8, tzinfo=UTC)  # newest first: the first is last

    # A document of before dating imports with each row dated when it was stored.
    undated = {
        **document,
        "passages": [
            {k: v for k, v in p.items() if k not in ("occurred_at", "valid_until", "superseded_by")} for p in document["passages"]
        ],
    }
    forget_agents_named(client, "time import undated")
    response = client.post("/v1/agents/import", params={"name": "time import undated"}, json=undated)
    assert response.status_code == 201, response.text
    for p in passages(client, response.json()["agent"]):
        assert p["occurred_at"] == p["created_at"] and p["superseded_by"] is None

    # Validity that does not hold together is refused, naming it.
    broken: list[tuple[dict[str, Any], str]] = [
        ({"valid_until": None}, "valid_until and superseded_by"),
        ({"superseded_by": "00000000-0000-0000-0000-000000000000"}, "not one of the document's passages"),
        ({"occurred_at": "in spring"}, "passages.0.occurred_at"),
    ]
    tokyo_index = [p["content"] for p in document["passages"]].index("The user lives in Tokyo.")
    for change, complaint in broken:
        passages_ = [dict(p) for p in document["passages"]]
        passages_[tokyo_index] |= change
        passages_.insert(0, passages_.pop(tokyo_index))
        response = client.post(
            "/v1/agents/import", params={"name": "time import broken"}, json={**document, "passages": passages_}
        )
        assert response.status_code == 422, response.text
        assert complaint in response.json()["detail"]


def test_letta_dates_become_when_it_was_said(client: TestClient) -> None:
    forget_agents_named(client, "letta dated")
    letta = {
        "agent_type": "memgpt_agent",
        "name": "letta dated",
        "messages": [
            {"role": "user", "content": "I started a new job today.", "created_at": "2023-03-01T09:00:00"},
            {"role": "user", "content": "It is going well.", "date": "2023-04-01T10:00:00Z"},
        ],
        "passages": [{"text": "The user works at a bakery.", "created_at": "2023-03-01T09:05:00Z"}],
    }
    response = client.post("/v1/agents/import", json=letta)
    assert response.status_code == 201, response.text
    agent = response.json()["agent"]
    messages = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert [at(m["occurred_at"]) for m in messages] == [datetime(2023, 4, 1, 10, tzinfo=UTC), datetime(2023, 3, 1, 9, tzinfo=UTC)]
    [passage] = passages(client, agent)
    assert at(passage["occurred_at"]) == datetime(2023, 3, 1, 9, 5, tzinfo=UTC)
