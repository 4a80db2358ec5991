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
