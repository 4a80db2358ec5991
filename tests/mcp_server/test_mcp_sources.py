"""Provenance over MCP (the `mcp` SDK's client, streamable HTTP): search_conversation_history gives the messages'
ids, insert_archival_memory takes them as `sources`, search_archival_memory's hits carry them; an id that is not
this agent's message or passage, or the passage itself, is a tool error naming it, and nothing is stored."""

import uuid

from fastapi.testclient import TestClient

from tests.mcp_server.test_mcp import new_agent
from tests.support.mcp import error_text, over_http, use


def hand_in(client: TestClient, agent: dict, text: str) -> str:
    response = client.post(f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": text}]})
    assert response.status_code == 201, response.text
    message_id: str = response.json()["message_ids"][0]
    return message_id


async def test_a_fact_inserted_with_its_sources_is_found_with_them(client: TestClient) -> None:
    agent, other = new_agent(client), new_agent(client)
    said = hand_in(client, agent, "This is Max, my new puppy!")
    theirs = hand_in(client, other, "This is Rex, my old dog.")
    async with over_http(client) as session:
        hits = (await use(session, "search_conversation_history", agent_id=agent["id"], query="puppy"))["messages"]
        assert [(h["id"], h["content"]) for h in hits] == [(said, "This is Max, my new puppy!")]

        fact = await use(
            session, "insert_archival_memory", agent_id=agent["id"], content="The user has a puppy, Max", sources=[said]
        )
        assert fact["sources"] == [said] and fact["duplicate"] is False
        found = await use(session, "search_archival_memory", agent_id=agent["id"], query="what pets does the user have")
        assert [(p["id"], p["sources"]) for p in found["passages"]] == [(fact["id"], [said])]
        assert client.get(f"/v1/agents/{agent['id']}/archival/{fact['id']}").json()["sources"] == [said]

        for source, why in (
            (str(uuid.uuid4()), "is not a message or passage of this agent"),
            (theirs, "is not a message or passage of this agent"),  # the same tenant's other agent
            (fact["id"], "is the passage itself"),  # a near-duplicate of the fact is the fact
        ):
            refused = await session.call_tool(
                "insert_archival_memory", {"agent_id": agent["id"], "content": "The user has a puppy, Max!", "sources": [source]}
            )
            assert f"invalid_request: source {source} {why}" in error_text(refused)
        malformed = await session.call_tool(
            "insert_archival_memory", {"agent_id": agent["id"], "content": "Max is brown", "sources": ["m1"]}
        )
        assert malformed.is_error and "sources" in error_text(malformed)
    listed = client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]
    assert [(p["id"], p["sources"]) for p in listed] == [(fact["id"], [said])]  # nothing else stored or changed
