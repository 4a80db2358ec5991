"""Recollection with facts (issue 55): a fact stands for the lines it was drawn from. It goes where they would and
they stay out, `memories[].sources` names them, and the chat prompt is handed the same memories as the API. (A fact's
subject as its speaker: tests/memory/test_named_speakers.py.)"""

from typing import Any

from fastapi.testclient import TestClient

from testkit.scripted_llm import ScriptedLLM
from tests.memory.test_recollection_api import lines_of, recollect, section_of
from tests.support.chat import chat, reply_with_recalled_memories

LINES = [
    "Nate: this is Max! He's been with us since spring and he loves the park.",
    "Joanna: Aww, he's adorable! My turtles are sleeping again, lazy things.",
    "Nate: Ha, turtles are great. I was gaming all weekend, won a tournament.",
    "Joanna: I finished the draft of my screenplay yesterday, finally.",
]
SESSION = "2023-05-08T13:56:00Z"


def hand_in_lines(client: TestClient, agent: dict) -> list[str]:
    items = [{"content": line, "occurred_at": SESSION} for line in LINES]
    response = client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": items})
    assert response.status_code == 201, response.text
    return [p["id"] for p in response.json()["items"]]


def store_fact(client: TestClient, agent: dict, content: str, sources: list[str]) -> dict:
    body = {"content": content, "occurred_at": SESSION, "sources": sources}
    response = client.post(f"/v1/agents/{agent['id']}/archival", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_a_fact_is_handed_over_with_its_sources_in_place_of_its_lines(client: TestClient, agent: dict) -> None:
    line_ids = hand_in_lines(client, agent)
    fact = store_fact(client, agent, "Nate has a dog named Max, who loves the park.", [line_ids[0]])
    found = recollect(client, agent, query="What pets does Nate have?", include_core=False)
    by_id = {m["id"]: m for m in found["memories"]}
    assert fact["id"] in by_id and by_id[fact["id"]]["sources"] == [line_ids[0]]
    assert line_ids[0] not in by_id  # the fact carries what its line says, in fewer characters
    assert all(m["sources"] == [] for m in found["memories"] if m["id"] != fact["id"])
    assert "Nate has a dog named Max" in found["text"] and "this is Max!" not in found["text"]
    # asked about its line's words, the fact still stands for it
    again = recollect(client, agent, query="Who has been with Nate since spring?", include_core=False)
    assert [m["id"] for m in again["memories"] if m["id"] in (fact["id"], line_ids[0])] == [fact["id"]]


def test_the_chat_prompt_is_handed_the_same_facts(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    line_ids = hand_in_lines(client, agent)
    store_fact(client, agent, "Nate has a dog named Max, who loves the park.", [line_ids[0]])
    store_fact(client, agent, "Joanna keeps turtles.", [line_ids[1]])
    question = "What pets do Nate and Joanna have?"
    api = recollect(client, agent, query=question, include_core=False, can_search=True)
    assert len(api["memories"]) >= 2
    llm.reset(fallback=reply_with_recalled_memories)
    chat(client, agent, question)
    prompt = llm.requests[0]["messages"][0]["content"]
    assert lines_of(section_of(prompt).split("\n\nCurrent time:", 1)[0]) == lines_of(api["text"])


def test_a_fact_holds_from_when_its_sources_were_said(client: TestClient, agent: dict) -> None:
    handed = client.post(
        f"/v1/agents/{agent['id']}/messages",
        json={"messages": [{"role": "user", "content": "I adopted a puppy called Biscuit!", "occurred_at": SESSION}]},
    )
    assert handed.status_code == 201, handed.text
    [said] = handed.json()["message_ids"]
    # distilled today, without a date of its own: dated when its source was said
    response = client.post(
        f"/v1/agents/{agent['id']}/archival", json={"content": "The user has a puppy, Biscuit.", "sources": [said]}
    )
    assert response.status_code == 201, response.text
    fact = response.json()
    assert fact["occurred_at"].startswith("2023-05-08T13:56:00")
    asked: dict[str, Any] = {"query": "What is my puppy called?", "kinds": ["archival"], "include_core": False}
    before = recollect(client, agent, **asked, as_of="2023-05-01T00:00:00Z")
    after = recollect(client, agent, **asked, as_of="2023-05-09T00:00:00Z")
    assert before["memories"] == [] and [m["id"] for m in after["memories"]] == [fact["id"]]
