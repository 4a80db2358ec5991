"""Recollection for a user's first week: a store of five dated messages handed in, as a newcomer's service would hand
them in (issue 54). The memory that answers comes through from the first memories on; a message that memory holds
nothing about, or that asks nothing, gets nothing; a question about a time gets what was said then."""

import pytest
from fastapi.testclient import TestClient

FIRST_WEEK = [
    ("I work as a data engineer at a logistics startup in Yokohama.", "2024-06-03T08:12:00+09:00"),
    ("My wife Emi has started learning to play the cello.", "2024-06-04T21:30:00+09:00"),
    ("I'm training for the Tokyo Marathon next March, 40 km a week for now.", "2024-06-05T07:05:00+09:00"),
    ("Went hiking on Mt. Takao with my brother, my legs are dead.", "2024-06-08T19:40:00+09:00"),
    ("Had tonkotsu ramen at Ichiran for dinner, so good.", "2024-06-11T20:15:00+09:00"),
]
NOW = "2024-06-12T09:30:00+09:00"  # a Wednesday, in the user's zone


@pytest.fixture
def first_week(client: TestClient, agent: dict) -> dict:
    messages = [{"role": "user", "content": text, "occurred_at": when} for text, when in FIRST_WEEK]
    response = client.post(f"/v1/agents/{agent['id']}/messages", json={"messages": messages})
    assert response.status_code == 201, response.text
    return agent


def recalled(client: TestClient, agent: dict, query: str) -> list[str]:
    body = {"query": query, "as_of": NOW, "include_core": False}
    response = client.post(f"/v1/agents/{agent['id']}/recollection", json=body)
    assert response.status_code == 200, response.text
    return [m["content"] for m in response.json()["memories"]]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What do I do for a living?", FIRST_WEEK[0][0]),
        ("What is my wife's name?", FIRST_WEEK[1][0]),
        ("What race am I training for?", FIRST_WEEK[2][0]),
        ("What's my job?", FIRST_WEEK[0][0]),  # no word shared
    ],
)
def test_in_a_store_of_five_the_memory_that_answers_comes_through(
    client: TestClient, first_week: dict, question: str, answer: str
) -> None:
    assert answer in recalled(client, first_week, question)


@pytest.mark.parametrize(
    ("question", "did_then", "said_then"),
    [
        # Monday 3 to Sunday 9 June in Tokyo (the 3rd's message is 2 June in UTC): not the ramen of the 11th
        ("What did I do last week?", {0, 2, 3}, {0, 1, 2, 3}),
        ("先週何をしましたか？", {0, 2, 3}, {0, 1, 2, 3}),
        ("What did I eat yesterday?", {4}, {4}),
        ("What did I do last weekend?", {3}, {3}),
        ("先週の月曜日に何をした？", {0}, {0}),
    ],
)
def test_a_question_about_a_time_gets_what_was_said_then(
    client: TestClient, first_week: dict, question: str, did_then: set[int], said_then: set[int]
) -> None:
    given = recalled(client, first_week, question)
    assert {FIRST_WEEK[i][0] for i in did_then} <= set(given)
    assert set(given) <= {FIRST_WEEK[i][0] for i in said_then}


@pytest.mark.parametrize(
    "message", ["What is the capital of France?", "How do I sort a list in Python?", "Yes", "ok thanks!", "はい"]
)
def test_a_message_memory_holds_nothing_about_or_that_asks_nothing_gets_nothing(
    client: TestClient, first_week: dict, message: str
) -> None:
    assert recalled(client, first_week, message) == []


def test_a_bare_reply_is_read_with_the_line_before_it(client: TestClient, first_week: dict) -> None:
    conversation = [
        {"role": "assistant", "content": "Are you still training for the marathon?"},
        {"role": "user", "content": "Yes"},
    ]
    body = {"messages": conversation, "as_of": NOW, "include_core": False}
    response = client.post(f"/v1/agents/{first_week['id']}/recollection", json=body)
    assert FIRST_WEEK[2][0] in [m["content"] for m in response.json()["memories"]]
