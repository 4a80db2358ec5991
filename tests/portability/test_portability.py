"""Export and import: one versioned document per agent; a round trip loses nothing; an import is atomic."""

import copy
import uuid
from typing import Any

from fastapi.testclient import TestClient

from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.support.chat import chat
from tests.support.database import run_sql
from tests.support.portability import comparable, counts, populate, recall_text, settled_export, unique_name
from tests.support.service import tenant_with_key


def test_round_trip_loses_nothing(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    name = f"Round trip {uuid.uuid4().hex[:8]}"
    client.patch(f"/v1/agents/{agent['id']}", json={"name": name})
    populate(client, agent, llm)
    before = settled_export(client, agent["id"])
    assert (before["format"], before["version"]) == ("engram.agent", 1)
    assert len(before["turns"]) == 2 and all(t["events"] for t in before["turns"])
    assert {b["label"]: len(b["history"]) for b in before["blocks"]} == {"human": 2, "persona": 2}
    assert {p["content"] for p in before["passages"]} == {"太郎の好きな食べ物はラーメン", "The user's cat is called Mochi"}
    assert all(p["embedding"] and p["embedding_model"] for p in before["passages"])

    # Its name is taken while the original lives: two agents of one name could no longer be reached by name.
    taken = client.post("/v1/agents/import", json=before)
    assert taken.status_code == 409 and "?name=" in taken.json()["detail"], taken.text
    assert [a["id"] for a in client.get("/v1/agents", params={"name": name}).json()["items"]] == [agent["id"]]
    assert client.delete(f"/v1/agents/{agent['id']}").status_code == 204
    imported = client.post("/v1/agents/import", json=before)
    assert imported.status_code == 201, imported.text
    result = imported.json()
    assert result["source"] == "engram" and result["embedded"] == 0  # same model: the vectors are taken as they are
    assert (result["blocks"], result["revisions"], result["passages"], result["turns"]) == (2, 4, 2, 2)
    assert result["messages"] == len(before["messages"])
    new_id = result["agent"]["id"]
    assert new_id != agent["id"]

    after = settled_export(client, new_id)
    assert after["agent"]["id"] == new_id
    assert {t["id"] for t in after["turns"]}.isdisjoint({t["id"] for t in before["turns"]})
    assert comparable(after) == comparable(before)

    # The imported agent is a working agent: its memory reads and searches like the original's.
    memory = client.get(f"/v1/agents/{new_id}/memory").json()["blocks"]
    assert {b["label"]: (b["value"], b["version"]) for b in memory} == {
        b["label"]: (b["value"], b["version"]) for b in before["blocks"]
    }
    history = client.get(f"/v1/agents/{new_id}/memory/human/history").json()["items"]
    assert [r["source"] for r in history] == ["agent", "api"] and history[0]["turn_id"] == after["turns"][0]["id"]
    found = client.get(f"/v1/agents/{new_id}/archival", params={"query": "好きな食べ物"}).json()["items"]
    assert found[0]["content"] == "太郎の好きな食べ物はラーメン"
    turn = client.get(f"/v1/agents/{new_id}/turns/{after['turns'][0]['id']}").json()
    assert turn["reply"] == "よろしく、太郎さん！" and all(e["agent_id"] == new_id for e in turn["events"])

    again = client.post("/v1/agents/import", json=before, params={"name": "Second copy"})
    assert again.status_code == 201
    assert again.json()["agent"]["id"] not in (agent["id"], new_id) and again.json()["agent"]["name"] == "Second copy"


def test_context_and_summary_survive(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    populate(client, agent, llm)
    document = settled_export(client, agent["id"])
    document["agent"] |= {"context_start": 3, "summary": "太郎はラーメンが好き。"}
    result = client.post("/v1/agents/import", json=document, params={"name": unique_name()}).json()
    after = client.get(f"/v1/agents/{result['agent']['id']}/export").json()
    assert (after["agent"]["context_start"], after["agent"]["summary"]) == (3, "太郎はラーメンが好き。")
    context = client.get(f"/v1/agents/{result['agent']['id']}/context").json()
    assert context["messages_out_of_context"] == 3 and context["summary"] == "太郎はラーメンが好き。"
    document["agent"]["context_start"] = len(document["messages"])  # everything has left the context
    result = client.post("/v1/agents/import", json=document, params={"name": unique_name()}).json()
    assert client.get(f"/v1/agents/{result['agent']['id']}/context").json()["messages"] == []


def test_an_imported_agent_is_searched_by_the_same_words_as_the_original(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str
) -> None:
    # The text full-text search reads is made where every row is stored, however it was written: the turn's
    # messages (prose without a tool among them), the API's passage and the import's copies of them all.
    populate(client, agent, llm)
    llm.reset(text("Matcha is at its best in Uji."), tools(call("send_message", text="Noted.")))
    chat(client, agent, "Where is matcha best?")
    imported = client.post("/v1/agents/import", json=settled_export(client, agent["id"]), params={"name": unique_name()})
    assert imported.status_code == 201, imported.text
    messages = "SELECT role, content, search_text FROM messages WHERE agent_id = :a ORDER BY seq"
    passages = "SELECT content, search_text FROM archival_passages WHERE agent_id = :a ORDER BY content"
    said = run_sql(database_url, messages, {"a": agent["id"]})
    assert ("assistant", "Matcha is at its best in Uji.", "matcha best uji") in said
    for rows in (messages, passages):
        original = run_sql(database_url, rows, {"a": agent["id"]})
        assert original and run_sql(database_url, rows, {"a": imported.json()["agent"]["id"]}) == original


def test_vectors_of_another_model_or_none_are_embedded_again(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    populate(client, agent, llm)
    bare = settled_export(client, agent["id"], embeddings="false")
    assert all(p["embedding"] is None for p in bare["passages"]) and all(m["embedding"] is None for m in bare["messages"])
    assert bare["embedding_model"] is None
    with_text = [m for m in bare["messages"] if m["role"] in ("user", "assistant") and recall_text(m)]
    result = client.post("/v1/agents/import", json=bare, params={"name": unique_name()}).json()
    assert result["embedded"] == len(bare["passages"]) + len(with_text)
    found = client.get(
        f"/v1/agents/{result['agent']['id']}/archival", params={"query": "What is the name of the cat?", "mode": "vector"}
    ).json()
    assert found["items"][0]["content"] == "The user's cat is called Mochi"

    foreign = settled_export(client, agent["id"])
    for row in foreign["passages"] + foreign["messages"]:
        if row["embedding"]:
            row["embedding_model"] = "text-embedding-3-small"
    assert client.post("/v1/agents/import", json=foreign, params={"name": unique_name()}).json()["embedded"] == result["embedded"]


def test_a_bad_document_is_422_naming_the_problem_and_writes_nothing(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str
) -> None:
    populate(client, agent, llm)
    good = settled_export(client, agent["id"])
    start = counts(database_url)

    def refused(document: Any, *expected: str) -> None:
        response = client.post("/v1/agents/import", json=document, params={"name": unique_name()})
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "invalid_request"
        for words in expected:
            assert words in response.json()["detail"], response.json()["detail"]

    refused({**good, "version": 2}, "version")
    refused({**good, "format": "something.else"}, "unknown format")
    refused({k: v for k, v in good.items() if k != "agent"}, "agent: Field required")
    refused({**good, "messages": [{**good["messages"][0], "role": "robot"}]}, "messages.0.role")
    refused({**good, "passages": [{**good["passages"][0], "colour": "red"}]}, "passages.0.colour", "Extra inputs")
    refused({**good, "passages": [{**good["passages"][0], "embedding": "not base64!"}]}, "passages.0.embedding")
    refused({**good, "blocks": [good["blocks"][0], good["blocks"][0]]}, "labels must be unique")
    refused({**good, "blocks": [{**good["blocks"][0], "label": "Bad Label"}]}, "blocks.0.label")
    refused({**good, "turns": good["turns"][1:]}, "not among the document's turns")
    refused({**good, "agent": {**good["agent"], "context_start": 999}}, "context_start")
    broken_event = copy.deepcopy(good)
    broken_event["turns"][0]["events"][0] = {"type": "no_such_event"}
    refused(broken_event, "no_such_event")
    refused([good], "expected a JSON object")
    refused("not json", "not JSON")
    refused({"hello": "world"}, "neither an Engram export")
    # A NUL character in the last message, which PostgreSQL cannot store: refused before anything is written.
    late = copy.deepcopy(good)
    late["messages"][-1]["content"] = "bad\u0000byte"
    refused(late, f"messages.{len(late['messages']) - 1}.content: must not contain a NUL character")
    assert counts(database_url) == start


def test_import_belongs_to_the_importing_tenant(keyed: TestClient) -> None:
    _, key_a = tenant_with_key(keyed, f"exporter-{uuid.uuid4().hex[:6]}")
    _, key_b = tenant_with_key(keyed, f"importer-{uuid.uuid4().hex[:6]}")
    a, b = {"Authorization": f"Bearer {key_a}"}, {"Authorization": f"Bearer {key_b}"}
    agent = keyed.post("/v1/agents", json={"name": "Travelling agent"}, headers=a).json()
    assert keyed.get(f"/v1/agents/{agent['id']}/export", headers=b).status_code == 404  # another tenant's agent
    document = keyed.get(f"/v1/agents/{agent['id']}/export", headers=a).json()
    assert keyed.post("/v1/agents/import", json=document).status_code == 401
    imported = keyed.post("/v1/agents/import", json=document, headers=b)
    assert imported.status_code == 201, imported.text
    new_id = imported.json()["agent"]["id"]
    assert keyed.get(f"/v1/agents/{new_id}", headers=b).status_code == 200
    assert keyed.get(f"/v1/agents/{new_id}", headers=a).status_code == 404
