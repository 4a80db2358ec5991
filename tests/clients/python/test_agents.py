"""client.agents against a served Engram: create, get, list, find by name, get_or_create, update, delete, export and
import; the errors each answers with."""

import httpx
import pytest
from engram_client import Agent, AsyncEngram, Conflict, Engram, InvalidRequest, NewBlock, NotFound

from tests.clients.python.conftest import unique
from tests.support.served import Served


def test_an_agent_is_created_read_listed_found_by_name_renamed_and_deleted(engram: Engram, agent: Agent) -> None:
    name = unique("Aiko")
    created = engram.agents.create(name, system="Answer in English.", blocks=[NewBlock(label="human", value="Aiko")])
    assert isinstance(created, Agent) and created.name == name and created.system == "Answer in English."
    assert [(b.label, b.value) for b in created.blocks] == [("human", "Aiko")]

    assert engram.agents.get(created.id) == created
    assert engram.agents.get(str(created.id)) == created  # an id as a string does too
    assert engram.agents.find(name) == created
    assert engram.agents.find(unique("nobody")) is None
    first = engram.agents.list(limit=1)  # there are two at least: this one and `agent`
    assert len(first.items) == 1 and first.next_cursor is not None
    second = engram.agents.list(limit=1, cursor=first.next_cursor)
    assert len(second.items) == 1 and second.items[0].id != first.items[0].id

    renamed = engram.agents.update(created.id, name=name + " (renamed)")
    assert renamed.name == name + " (renamed)" and renamed.system == "Answer in English."
    assert engram.agents.delete(created.id) is None
    with pytest.raises(NotFound) as gone:
        engram.agents.get(created.id)
    assert (gone.value.status, gone.value.code) == (404, "not_found")


def test_get_or_create_finds_the_agent_it_created_before(engram: Engram) -> None:
    name = unique("Hana")
    first = engram.agents.get_or_create(name)
    try:
        assert engram.agents.get_or_create(name) == first
        # one agent of the name (the first page of a full run's agents may not reach it: asked by name)
        assert engram.agents.find(name) == first
    finally:
        engram.agents.delete(first.id)


def test_a_name_taken_is_a_conflict_and_an_invalid_one_an_invalid_request(engram: Engram, agent: Agent) -> None:
    with pytest.raises(Conflict) as taken:
        engram.agents.create(agent.name)
    assert taken.value.status == 409 and agent.name in taken.value.message
    with pytest.raises(InvalidRequest) as invalid:
        engram.agents.create("x" * 201)
    assert invalid.value.status == 422 and "name" in invalid.value.message
    assert invalid.value.request_id  # the server's X-Request-ID, to find the request in its log


def test_an_export_imports_as_a_new_agent_with_its_memory(engram: Engram, agent: Agent) -> None:
    engram.archival.add(agent.id, "Aiko's cat is called Mochi.", tags=["pets"])
    document = engram.agents.export(agent.id, embeddings=False)
    assert document["format"] == "engram.agent" and document["agent"]["name"] == agent.name
    copy = unique("copy")
    imported = engram.agents.import_document(document, name=copy)
    try:
        assert (imported.source, imported.passages, imported.agent.name) == ("engram", 1, copy)
        assert imported.embedded == 1  # exported without vectors: embedded again on import
        [passage] = engram.archival.list(imported.agent.id).items
        assert (passage.content, passage.tags) == ("Aiko's cat is called Mochi.", ["pets"])
    finally:
        engram.agents.delete(imported.agent.id)


def test_the_url_and_key_default_to_the_environment(service: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_URL", service.url + "/")
    with Engram() as engram:
        assert engram.base_url == service.url
        assert engram.agents.find(unique("nobody")) is None


async def test_a_client_closes_the_connections_it_opened_and_leaves_yours_open(service: Served) -> None:
    with Engram(service.url) as engram:
        assert engram.agents.find(unique("nobody")) is None
    with pytest.raises(RuntimeError, match="closed"):
        engram.agents.find(unique("nobody"))
    async with AsyncEngram(service.url) as aengram:
        assert await aengram.agents.find(unique("nobody")) is None
    with pytest.raises(RuntimeError, match="closed"):
        await aengram.agents.find(unique("nobody"))
    with httpx.Client() as mine:
        with Engram(service.url, http_client=mine) as engram:
            engram.agents.find(unique("nobody"))
        assert mine.get(f"{service.url}/healthz").status_code == 200  # still open: it is yours
