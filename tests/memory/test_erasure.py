"""Erasure (app/memory/archival/erasure.py): a message forgotten with DELETE …/messages/{id} is found nowhere after (listing,
search by words and by meaning, recollection, the BM25 statistics); erasing a message or a passage erases the
passages drawn from it alone, down a chain, and trims the sources of those drawn also from something else;
supersession takes no fact along; unknown ids and other agents' are 404s that change nothing."""

import uuid
from typing import Any

from fastapi.testclient import TestClient

from app.memory.search.lexical import search_text
from tests.support.database import run_sql

SAID = "My sister Yuki works as a nurse at the hospital in Sapporo."
OTHERS = ["I bought a new bicycle for the commute.", "We had ramen for dinner on Friday."]


def said(client: TestClient, agent: dict, *texts: str) -> list[str]:
    """Hand the texts in as the user's messages; their ids."""
    response = client.post(
        f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": t} for t in texts]}
    )
    assert response.status_code == 201, response.text
    return list(response.json()["message_ids"])


def drawn(client: TestClient, agent: dict, content: str, *sources: str) -> str:
    """Store a passage drawn from `sources`; its id."""
    response = client.post(f"/v1/agents/{agent['id']}/archival", json={"content": content, "sources": list(sources)})
    assert response.status_code == 201, response.text
    assert response.json()["sources"] == list(sources)
    return str(response.json()["id"])


def passage(client: TestClient, agent: dict, passage_id: str) -> dict[str, Any] | None:
    response = client.get(f"/v1/agents/{agent['id']}/archival/{passage_id}")
    assert response.status_code in (200, 404), response.text
    return response.json() if response.status_code == 200 else None


def forget(client: TestClient, agent: dict, message_id: str, status: int = 200) -> dict[str, Any]:
    response = client.delete(f"/v1/agents/{agent['id']}/messages/{message_id}")
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    return body


def message_search(client: TestClient, agent: dict, query: str) -> list[str]:
    response = client.get(f"/v1/agents/{agent['id']}/messages", params={"query": query, "include_context": True})
    assert response.status_code == 200, response.text
    return [m["content"] for m in response.json()["items"]]


def lexical(database_url: str, agent: dict) -> tuple[int, set[str]]:
    """The agent's recall BM25 statistics as kept: documents, and the terms with a document frequency."""
    agent_id = uuid.UUID(agent["id"])
    [(docs,)] = run_sql(
        database_url, "SELECT docs FROM lexical_corpus WHERE agent_id = :a AND source = 'messages'", {"a": agent_id}
    )
    terms = run_sql(database_url, "SELECT term FROM lexical_terms WHERE agent_id = :a AND source = 'messages'", {"a": agent_id})
    return docs, {t for (t,) in terms}


def test_a_forgotten_message_is_found_nowhere(client: TestClient, agent: dict, database_url: str) -> None:
    [yuki, *_] = said(client, agent, SAID, *OTHERS)
    by_meaning = "What does her sibling do for a living?"
    assert SAID in message_search(client, agent, "Sapporo nurse") and SAID in message_search(client, agent, by_meaning)
    question = {"query": "Where does my sister Yuki work?"}
    assert SAID in client.post(f"/v1/agents/{agent['id']}/recollection", json=question).json()["text"]
    own = set(search_text(SAID).split()) - set(search_text(" ".join(OTHERS)).split())  # its words alone
    docs, terms = lexical(database_url, agent)
    assert docs == 3 and {"sapporo", "yuki"} <= own <= terms

    assert forget(client, agent, yuki) == {
        "id": yuki,
        "erased_messages": [yuki],
        "erased_passages": [],
        "sources_trimmed": 0,
        "summary_withdrawn": False,
    }
    listed = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert sorted(m["content"] for m in listed) == sorted(OTHERS)
    for query in ("Sapporo nurse", "Yuki", by_meaning):
        assert SAID not in message_search(client, agent, query)
    recollected = client.post(f"/v1/agents/{agent['id']}/recollection", json=question)
    assert recollected.status_code == 200 and "Sapporo" not in recollected.text
    docs, terms = lexical(database_url, agent)
    assert docs == 2 and not own & terms and "ramen" in terms
    assert run_sql(database_url, "SELECT count(*) FROM messages WHERE id = :id", {"id": uuid.UUID(yuki)}) == [(0,)]
    assert forget(client, agent, yuki, status=404)["error"] == "not_found"


def test_passages_drawn_from_a_forgotten_message_alone_go_with_it_down_the_chain(client: TestClient, agent: dict) -> None:
    yuki, bicycle = said(client, agent, SAID, OTHERS[0])
    only = drawn(client, agent, "The user's sister Yuki is a nurse.", yuki)
    both = drawn(client, agent, "The user's family: a sister who nurses, a bicycle to commute.", yuki, bicycle)
    chained = drawn(client, agent, "The user has a sister.", only)  # drawn from a passage drawn from the message
    mixed = drawn(client, agent, "The user's sister lives in Hokkaido and the user cycles.", only, bicycle)
    given = client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user likes green tea."}).json()["id"]

    erased = forget(client, agent, yuki)
    assert sorted(erased["erased_passages"]) == sorted([only, chained]) and erased["sources_trimmed"] == 2
    assert passage(client, agent, only) is None and passage(client, agent, chained) is None
    assert (kept := passage(client, agent, both)) and kept["sources"] == [bicycle]
    assert (kept := passage(client, agent, mixed)) and kept["sources"] == [bicycle]
    assert (kept := passage(client, agent, given)) and kept["sources"] == []
    found = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "sister nurse Yuki"}).json()["items"]
    assert {p["id"] for p in found} == {both, mixed, given}

    # The bicycle's message goes too: what was drawn from both now has no source left.
    erased = forget(client, agent, bicycle)
    assert sorted(erased["erased_passages"]) == sorted([both, mixed]) and erased["sources_trimmed"] == 0
    assert passage(client, agent, given) is not None


def test_deleting_a_passage_erases_what_was_drawn_from_it_and_restores_what_it_superseded(
    client: TestClient, agent: dict
) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    [ramen] = said(client, agent, OTHERS[1])
    old = client.post(base, json={"content": "The user lives in Kyoto."}).json()["id"]
    new = client.post(f"{base}/{old}/supersede", json={"content": "The user lives in Osaka."}).json()["id"]
    only = drawn(client, agent, "The user moved to Osaka.", new)
    both = drawn(client, agent, "The user eats ramen in Osaka.", new, ramen)

    response = client.delete(f"{base}/{new}")
    assert response.status_code == 200, response.text
    assert response.json() == {"id": new, "erased_passages": [only], "sources_trimmed": 1}
    assert passage(client, agent, new) is None and passage(client, agent, only) is None
    assert (kept := passage(client, agent, both)) and kept["sources"] == [ramen]
    assert (current := passage(client, agent, old)) and current["superseded_by"] is None and current["valid_until"] is None


def test_a_derived_passage_erased_makes_what_it_superseded_current_again(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    [move] = said(client, agent, "I moved from Kyoto to Osaka last month.")
    old = client.post(base, json={"content": "The user lives in Kyoto."}).json()["id"]
    response = client.post(f"{base}/{old}/supersede", json={"content": "The user lives in Osaka.", "sources": [move]})
    assert response.status_code == 201, response.text
    assert forget(client, agent, move)["erased_passages"] == [response.json()["id"]]
    assert (current := passage(client, agent, old)) and current["superseded_by"] is None


def test_superseding_a_source_takes_no_fact_along(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    plan = client.post(base, json={"content": "The user plans a trip to Hokkaido in July."}).json()["id"]
    fact = drawn(client, agent, "The user travels in summer.", plan)
    replaced = client.post(f"{base}/{plan}/supersede", json={"content": "The user plans a trip to Okinawa in July."})
    assert replaced.status_code == 201, replaced.text
    assert (kept := passage(client, agent, fact)) and kept["sources"] == [plan] and kept["superseded_by"] is None
    assert (old := passage(client, agent, plan)) and old["superseded_by"] == replaced.json()["id"]


def test_unknown_and_other_agents_ids_are_404s_that_erase_nothing(client: TestClient, agent: dict) -> None:
    other = client.post("/v1/agents", json={"name": f"erasure other {uuid.uuid4().hex[:8]}"}).json()
    [theirs] = said(client, other, SAID)
    their_fact = drawn(client, other, "Their sister is a nurse.", theirs)
    [mine] = said(client, agent, SAID)
    my_fact = drawn(client, agent, "My sister is a nurse.", mine)

    for missing in (theirs, str(uuid.uuid4()), my_fact):  # another agent's message, none, a passage's id
        body = forget(client, agent, missing, status=404)
        assert body["error"] == "not_found" and missing in body["detail"]
    for missing in (their_fact, str(uuid.uuid4()), mine):  # DELETE …/archival with a message's id erases nothing
        response = client.delete(f"/v1/agents/{agent['id']}/archival/{missing}")
        assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert client.delete(f"/v1/agents/{agent['id']}/messages/not-a-uuid").status_code == 422
    assert passage(client, agent, my_fact) is not None and passage(client, other, their_fact) is not None
    assert SAID in message_search(client, other, "Sapporo") and SAID in message_search(client, agent, "Sapporo")

    forget(client, agent, mine)
    assert SAID in message_search(client, other, "Sapporo") and passage(client, other, their_fact) is not None
    client.delete(f"/v1/agents/{other['id']}")
