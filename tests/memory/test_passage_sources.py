"""Provenance: a passage's `sources` (this agent's messages and passages it was distilled from) accepted by POST
…/archival, the batch, the import job and supersede; read back by GET, the listing and search; refused (422 naming
the id) when unknown, another agent's or the passage itself, with nothing stored."""

import asyncio
import uuid
from typing import Any

from fastapi.testclient import TestClient
from httpx2 import Response

from app import db
from app.agents.models import Agent
from app.auth.models import DEFAULT_TENANT_ID
from app.llm.embeddings import Embedder
from app.memory.archival.erasure import erase_passage
from app.memory.archival.imports import ImportWorker, create_job, describe, get_job
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.models import ImportJob, Message
from app.memory.schemas import MAX_SOURCES, PassageWrite
from testkit.bulk import JSON_LINES, json_lines
from tests.support.imports import ended, wait_for


def hand_in(client: TestClient, agent: dict, *texts: str) -> list[str]:
    """The ids of the messages handed in."""
    messages = [{"role": "user", "content": text} for text in texts]
    response = client.post(f"/v1/agents/{agent['id']}/messages", json={"messages": messages})
    assert response.status_code == 201, response.text
    ids: list[str] = response.json()["message_ids"]
    return ids


def store(client: TestClient, agent: dict, content: str, **fields: Any) -> dict[str, Any]:
    response = client.post(f"/v1/agents/{agent['id']}/archival", json={"content": content, **fields})
    assert response.status_code == 201, response.text
    passage: dict[str, Any] = response.json()
    return passage


def refused(response: Response, source: str, *words: str) -> None:
    """A 422 in Engram's error body, naming the source."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_request" and source in body["detail"], body
    for word in words:
        assert word in body["detail"], body


def passages(client: TestClient, agent: dict) -> list[dict[str, Any]]:
    response = client.get(f"/v1/agents/{agent['id']}/archival", params={"limit": 200, "include_superseded": True})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def new_agent(client: TestClient) -> dict[str, Any]:
    response = client.post("/v1/agents", json={"name": f"sources {uuid.uuid4().hex[:8]}"})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_sources_are_stored_and_read_back_by_get_list_and_search(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    said, replied = hand_in(client, agent, "This is Max, my new puppy!", "We walk Max by the river every morning.")
    plain = store(client, agent, "The user lives near a river")
    assert plain["sources"] == []
    fact = store(client, agent, "The user has a dog called Max", sources=[said, plain["id"], said])
    assert fact["sources"] == [said, plain["id"]]  # each once, in the order given

    assert client.get(f"{base}/{fact['id']}").json()["sources"] == [said, plain["id"]]
    listed = {p["id"]: p["sources"] for p in client.get(base).json()["items"]}
    assert listed == {fact["id"]: [said, plain["id"]], plain["id"]: []}
    hits = client.get(base, params={"query": "what pets does the user have", "k": 1}).json()["items"]
    assert [(h["id"], h["sources"]) for h in hits] == [(fact["id"], [said, plain["id"]])]

    batch = client.post(
        f"{base}/batch",
        json={"items": [{"content": "The user walks the dog every morning", "sources": [replied, fact["id"]]}, {"content": "x"}]},
    )
    assert batch.status_code == 201, batch.text
    assert [p["sources"] for p in batch.json()["items"]] == [[replied, fact["id"]], []]

    # The same fact drawn again, from another line: the stored passage stands for both.
    again = client.post(base, json={"content": "The user has a dog called Max.", "sources": [replied]})
    assert again.status_code == 200 and again.json()["id"] == fact["id"], again.text
    assert again.json()["sources"] == [said, plain["id"], replied]


def test_unknown_another_agents_and_its_own_id_are_refused_on_post_and_batch(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    [mine] = hand_in(client, agent, "I grow tomatoes on the balcony.")
    stored = store(client, agent, "The user grows tomatoes")
    other = new_agent(client)  # the same tenant's, and still not this agent's
    [theirs] = hand_in(client, other, "I grow basil.")
    their_passage = store(client, other, "The other user grows basil")
    unknown = str(uuid.uuid4())
    before = passages(client, agent)

    for source in (unknown, theirs, their_passage["id"]):
        refused(client.post(base, json={"content": "A new fact", "sources": [mine, source]}), source, "not a message or passage")
    # The passage itself: a near-duplicate of the stored passage is that passage, which was not drawn from itself.
    refused(client.post(base, json={"content": "The user grows tomatoes!", "sources": [stored["id"]]}), stored["id"], "itself")
    items = [{"content": "fine", "sources": [mine]}, {"content": "bad", "sources": [theirs]}]
    refused(client.post(f"{base}/batch", json={"items": items}), theirs, "item 1:")
    # A request of items names the item, one alone too; a single passage's request has none to name.
    refused(client.post(f"{base}/batch", json={"items": items[1:]}), theirs, "item 0:")
    items = [{"content": "fine", "sources": [mine]}, {"content": "The user grows tomatoes!", "sources": [stored["id"]]}]
    refused(client.post(f"{base}/batch", json={"items": items}), stored["id"], "item 1:", "itself")
    single = client.post(base, json={"content": "The user grows tomatoes!", "sources": [stored["id"]]})
    assert "item" not in single.json()["detail"], single.text
    malformed = client.post(base, json={"content": "A new fact", "sources": ["message-1"]})
    assert malformed.status_code == 422 and "sources.0" in malformed.json()["detail"], malformed.text
    too_many = client.post(base, json={"content": "A new fact", "sources": [mine] * (MAX_SOURCES + 1)})
    assert too_many.status_code == 422 and "sources" in too_many.json()["detail"], too_many.text
    assert passages(client, agent) == before  # nothing stored, nothing changed
    assert client.get(f"{base}/{stored['id']}").json()["sources"] == []


def test_supersede_takes_the_successors_sources_and_the_old_passage_keeps_its_own(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    kyoto, sapporo = hand_in(client, agent, "My sister lives in Kyoto.", "My sister just moved to Sapporo for work.")
    old = store(client, agent, "The user's sister lives in Kyoto", sources=[kyoto])
    other = new_agent(client)
    [theirs] = hand_in(client, other, "My sister lives in Osaka.")

    for source in (str(uuid.uuid4()), theirs):
        refused(client.post(f"{base}/{old['id']}/supersede", json={"content": "Now in Sapporo", "sources": [source]}), source)
    assert client.get(f"{base}/{old['id']}").json()["superseded_by"] is None  # refused: the old one is still current

    new = client.post(
        f"{base}/{old['id']}/supersede",
        json={"content": "The user's sister lives in Sapporo", "sources": [sapporo, old["id"]]},
    )
    assert new.status_code == 201, new.text
    assert new.json()["sources"] == [sapporo, old["id"]]
    closed = client.get(f"{base}/{old['id']}").json()
    assert (closed["superseded_by"], closed["sources"]) == (new.json()["id"], [kyoto])

    # A successor that is a current passage with the same text cannot be its own source.
    same = store(client, agent, "The user's sister works as a nurse")
    current = store(client, agent, "The user's sister works in a hospital")
    itself = client.post(
        f"{base}/{current['id']}/supersede", json={"content": "The user's sister works as a nurse!", "sources": [same["id"]]}
    )
    refused(itself, same["id"], "itself")
    assert client.get(f"{base}/{current['id']}").json()["superseded_by"] is None


def test_an_import_job_keeps_its_items_sources_and_refuses_a_bad_one_at_once(client: TestClient, agent: dict) -> None:
    path = f"/v1/agents/{agent['id']}/archival/import"
    said, later = hand_in(client, agent, "Nate: this is Max!", "Nate: Max chewed my shoes again.")
    stored = store(client, agent, "Nate has a dog")
    other = new_agent(client)
    [theirs] = hand_in(client, other, "I have a cat.")
    items: list[dict[str, Any]] = [
        {"content": "Nate's dog is called Max", "sources": [said, stored["id"]]},
        {"content": "Max chews shoes", "sources": [later]},
        # a near-duplicate of the passage stored as given: that one stays as given (and is not its own source)
        {"content": "Nate has a dog.", "sources": [said, stored["id"]]},
        {"content": "Nate likes hiking"},
    ]
    for source in (str(uuid.uuid4()), theirs):
        bad = [*items[:2], {"content": "Nate has a parrot", "sources": [source]}]
        refused(client.post(path, content=json_lines(bad), headers=JSON_LINES), source, "item 2:")
        refused(client.post(path, json=bad), source, "item 2:")  # a JSON array alike
        refused(client.post(path, json=bad[2:]), source, "item 0:")  # an import of one item names it too
    assert passages(client, agent) == [client.get(f"/v1/agents/{agent['id']}/archival/{stored['id']}").json()]

    started = client.post(path, content=json_lines(items), headers=JSON_LINES)
    assert started.status_code == 202, started.text
    job = wait_for(client, started.headers["location"], ended)
    assert (job["status"], job["done"], job["duplicates"]) == ("done", 4, 1), job
    by_content = {p["content"]: p["sources"] for p in passages(client, agent)}
    assert by_content == {
        "Nate has a dog": [],
        "Nate's dog is called Max": [said, stored["id"]],
        "Max chews shoes": [later],
        "Nate likes hiking": [],
    }


def test_an_import_job_drops_sources_erased_before_its_items_are_stored(database_url: str, embedder: Embedder) -> None:
    """Sources are checked when the job is submitted; one erased before the worker reaches its item is dropped, a
    passage drawn only from erased sources is not stored (the job counts it skipped), and a near-duplicate naming its
    original drops that one."""

    async def run() -> tuple[ImportJob, dict[str, list[uuid.UUID]], dict[str, uuid.UUID]]:
        engine = db.create_engine(database_url)
        sessions = db.session_factory(engine)
        try:
            async with db.transaction(sessions) as session:
                agent = Agent(tenant_id=DEFAULT_TENANT_ID, name=f"import sources {uuid.uuid4().hex[:8]}")
                session.add(agent)
                await session.flush()
                message = Message(agent_id=agent.id, role="user", content="I adopted a dog called Max")
                session.add(message)
                archival = ArchivalMemory(session, embedder)
                news = [NewPassage(content="Max is a puppy"), NewPassage(content="Nate has a dog")]
                gone, kept = [s.passage for s in await archival.add(agent.id, news)]
                ids = {"message": message.id, "gone": gone.id, "kept": kept.id}
                items = [
                    PassageWrite(content="Max is a young dog", sources=[message.id, gone.id]),
                    PassageWrite(content="Max was a puppy in May", sources=[gone.id]),
                    PassageWrite(content="Nate has a dog!", sources=[kept.id, message.id]),
                ]
                job = await create_job(session, agent.id, items)
            async with db.transaction(sessions) as session:
                await erase_passage(ArchivalMemory(session, embedder), agent.id, gone.id)
            assert await ImportWorker(engine, sessions, embedder).run_next()
            async with db.reading(sessions) as session:
                done = await get_job(session, agent.id, job.id)
                rows, _ = await ArchivalMemory(session, embedder).page(agent.id, limit=10, cursor=None)
                return done, {p.content: list(p.sources) for p in rows}, ids
        finally:
            await engine.dispose()

    job, stored, ids = asyncio.run(run())
    assert (job.status, job.done, job.duplicates, job.skipped) == ("done", 3, 1, 1)  # skipped: "Max was a puppy in May"
    assert describe(job).skipped == 1
    assert stored == {"Max is a young dog": [ids["message"]], "Nate has a dog": []}


def test_a_passage_stored_as_given_stays_so_when_a_fact_drawn_from_a_line_is_its_near_duplicate(
    client: TestClient, agent: dict
) -> None:
    given = store(client, agent, "The user has a dog called Max.")
    [said] = hand_in(client, agent, "This is Max, my dog!")
    again = client.post(
        f"/v1/agents/{agent['id']}/archival", json={"content": "The user has a dog called Max", "sources": [said]}
    )
    assert again.status_code == 200 and again.json()["id"] == given["id"] and again.json()["sources"] == []
    # forgetting the line takes nothing that was given
    assert client.delete(f"/v1/agents/{agent['id']}/messages/{said}").status_code == 200
    assert client.get(f"/v1/agents/{agent['id']}/archival/{given['id']}").status_code == 200


def test_a_fact_drawn_again_keeps_the_lines_it_was_first_drawn_from_up_to_the_limit(client: TestClient, agent: dict) -> None:
    lines = hand_in(client, agent, *[f"Nate: Max the dog did trick number {i} today!" for i in range(MAX_SOURCES + 2)])
    fact = store(client, agent, "Nate has a dog called Max who does tricks.", sources=lines[:2])
    for line in lines[2:]:
        body = {"content": "Nate has a dog called Max who does tricks", "sources": [line]}
        again = client.post(f"/v1/agents/{agent['id']}/archival", json=body)
        assert again.status_code == 200 and again.json()["id"] == fact["id"], again.text
    assert client.get(f"/v1/agents/{agent['id']}/archival/{fact['id']}").json()["sources"] == lines[:MAX_SOURCES]
