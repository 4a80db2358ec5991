"""Passages' sources in the export document: exported as the rows' ids, mapped on import to the new ids of the
imported messages and passages (a passage may cite one that comes after it); a source the document does not hold,
or a passage naming itself, is a 422 naming it, and nothing is written."""

import json
import uuid
from typing import Any

from fastapi.testclient import TestClient

from app.memory.schemas import MAX_SOURCES
from tests.support.portability import comparable, counts, settled_export, unique_name


def sourced_agent(client: TestClient, agent: dict) -> dict[str, Any]:
    """Two lines handed in, a fact drawn from one of them and a passage, and that fact superseded by one drawn from
    the other and from it: the agent's export."""
    base = f"/v1/agents/{agent['id']}"
    lines = [
        {"role": "user", "content": "This is Max, my new puppy!"},
        {"role": "user", "content": "Max is a year old now and chews everything."},
    ]
    said, later = client.post(f"{base}/messages", json={"messages": lines}).json()["message_ids"]
    plain = client.post(f"{base}/archival", json={"content": "The user lives near a park"}).json()
    fact = client.post(f"{base}/archival", json={"content": "The user has a puppy, Max", "sources": [said, plain["id"]]})
    assert fact.status_code == 201, fact.text
    newer = client.post(
        f"{base}/archival/{fact.json()['id']}/supersede",
        json={"content": "The user has a one-year-old dog, Max", "sources": [later, fact.json()["id"]]},
    )
    assert newer.status_code == 201, newer.text
    return settled_export(client, agent["id"])


def import_as_new(client: TestClient, document: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/agents/import", json=document, params={"name": unique_name()})
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def test_export_then_import_keeps_sources_mapped_to_the_new_ids(client: TestClient, agent: dict) -> None:
    before = sourced_agent(client, agent)
    by_content = {p["content"]: p for p in before["passages"]}
    messages = {m["content"]: m["id"] for m in before["messages"]}
    fact, newer = by_content["The user has a puppy, Max"], by_content["The user has a one-year-old dog, Max"]
    assert fact["sources"] == [messages["This is Max, my new puppy!"], by_content["The user lives near a park"]["id"]]
    assert newer["sources"] == [messages["Max is a year old now and chews everything."], fact["id"]]
    named = [p["sources"] for p in json.loads(comparable(before))["passages"]]
    assert sorted(named) == [[], ["messages[0]", "passages[0]"], ["messages[1]", "passages[1]"]]  # the document's rows

    # A passage may come before those it cites: the document's passages reversed import all the same.
    reversed_order = {**before, "passages": before["passages"][::-1]}
    for document in (before, reversed_order):
        new_id = import_as_new(client, document)["agent"]["id"]
        after = settled_export(client, new_id)
        assert not {p["id"] for p in after["passages"]} & {p["id"] for p in before["passages"]}  # new ids
        renamed = {**after, "agent": {**after["agent"], "name": before["agent"]["name"]}}
        assert comparable(renamed) == comparable(before)  # every source names the imported row in the original's place
        new_passages = {p["content"]: p["id"] for p in after["passages"]}
        new_messages = {m["content"]: m["id"] for m in after["messages"]}
        read = client.get(f"/v1/agents/{new_id}/archival/{new_passages['The user has a one-year-old dog, Max']}").json()
        assert read["sources"] == [
            new_messages["Max is a year old now and chews everything."],
            new_passages["The user has a puppy, Max"],
        ]
        client.delete(f"/v1/agents/{new_id}")


def test_a_source_the_document_does_not_hold_or_a_passage_naming_itself_is_422(
    client: TestClient, agent: dict, database_url: str
) -> None:
    good = sourced_agent(client, agent)
    start = counts(database_url)
    last = len(good["passages"]) - 1
    sourced = next(i for i, p in enumerate(good["passages"]) if p["sources"])

    def refused(passage: dict[str, Any], index: int, *expected: str) -> None:
        passages = [*good["passages"]]
        passages[index] = passage
        response = client.post("/v1/agents/import", json={**good, "passages": passages}, params={"name": unique_name()})
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "invalid_request"
        for words in expected:
            assert words in response.json()["detail"], response.json()["detail"]

    stranger = str(uuid.uuid4())  # another agent's message, say: not in this document
    own = good["passages"][last]
    refused({**own, "sources": [stranger]}, last, f"passages[{last}] names source {stranger}", "not one of the document's")
    refused({**own, "sources": [own["id"]]}, last, f"passages[{last}] names itself ({own['id']})")
    refused({**good["passages"][sourced], "sources": [good["messages"][0]["id"]] * (MAX_SOURCES + 1)}, sourced, "sources")
    refused({**own, "sources": ["passage-1"]}, last, f"passages.{last}.sources.0")
    # A cited message twice in the document: which of the two would the source be?
    cited = next(m for m in good["messages"] if m["id"] == good["passages"][sourced]["sources"][0])
    twice = {**good, "messages": [*good["messages"], {**cited, "content": "again"}]}
    response = client.post("/v1/agents/import", json=twice, params={"name": unique_name()})
    assert response.status_code == 422 and f"{cited['id']}, which is there twice" in response.json()["detail"], response.text
    assert counts(database_url) == start  # nothing written
