"""Provenance on Letta's API (letta-client): a passage's sources come back in Letta's `metadata` (Engram's ids), on
the passages listed and searched; a passage without any has Letta's empty metadata."""

from fastapi.testclient import TestClient

from tests.support.letta import letta_sdk, unique


def test_passages_carry_their_sources_in_metadata(client: TestClient) -> None:
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("sources"), model="openai/gpt-4o-mini", embedding="openai/text-embedding-3-small")
    engram = f"/v1/agents/{agent.id.removeprefix('agent-')}"
    lines = [{"role": "user", "content": "This is Max, my new puppy!"}]
    [said] = client.post(f"{engram}/messages", json={"messages": lines}).json()["message_ids"]
    fact = client.post(f"{engram}/archival", json={"content": "The user has a puppy, Max", "sources": [said]})
    assert fact.status_code == 201, fact.text
    plain = sdk.agents.passages.create(agent_id=agent.id, text="The user lives in Osaka")

    assert plain[0].metadata == {}
    listed = {p.text: p.metadata for p in sdk.agents.passages.list(agent.id)}
    assert listed == {"The user has a puppy, Max": {"sources": [said]}, "The user lives in Osaka": {}}
    found = sdk.agents.passages.list(agent.id, search="pets")
    assert found[0].id == f"passage-{fact.json()['id']}" and found[0].metadata == {"sources": [said]}
    sdk.agents.delete(agent.id)


def test_an_engram_export_imported_without_its_messages_keeps_the_sources_that_are_passages(client: TestClient) -> None:
    """`strip_messages`: the conversation stays behind, so a source that is a message goes; a passage drawn only from
    messages is stored as given (no sources), one drawn also from a passage keeps that passage's new id."""
    sdk = letta_sdk(client)
    agent = sdk.agents.create(name=unique("stripped"), model="openai/gpt-4o-mini", embedding="openai/text-embedding-3-small")
    engram = f"/v1/agents/{agent.id.removeprefix('agent-')}"
    lines = [{"role": "user", "content": "This is Max, my new puppy!"}]
    [said] = client.post(f"{engram}/messages", json={"messages": lines}).json()["message_ids"]
    fact = client.post(f"{engram}/archival", json={"content": "The user has a puppy, Max", "sources": [said]}).json()
    both = client.post(f"{engram}/archival", json={"content": "The user's puppy is Max", "sources": [said, fact["id"]]})
    assert both.status_code == 201, both.text
    exported = client.get(f"{engram}/export").content

    imported = sdk.agents.import_file(
        file=("engram.json", exported, "application/json"), strip_messages=True, append_copy_suffix=True
    )
    [copy_id] = imported.agent_ids
    assert list(sdk.agents.messages.list(copy_id)) == []
    passages = client.get(f"/v1/agents/{copy_id.removeprefix('agent-')}/archival").json()["items"]
    sources = {p["content"]: p["sources"] for p in passages}
    new_fact = next(p["id"] for p in passages if p["content"] == "The user has a puppy, Max")
    assert sources == {"The user has a puppy, Max": [], "The user's puppy is Max": [new_fact]}
    sdk.agents.delete(agent.id)
    sdk.agents.delete(copy_id)
