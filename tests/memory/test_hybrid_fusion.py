"""Hybrid search ranking, with embeddings placed by hand so the geometry is known: how the cosine and BM25 sides
are fused, through the real SQL on a real PostgreSQL."""

import math
import uuid
from collections.abc import Iterator, Sequence

import pytest
from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer

from app.main import create_app
from app.memory.archival.service import ArchivalMemory
from app.memory.recall.service import RecallMemory
from app.memory.search.query import SearchQuery
from app.runtime import runtime
from app.settings import E5_DIM, Settings
from tests.support.database import create_database
from tests.support.service import app_of, checked_client


def unit(**components: float) -> list[float]:
    """A vector with the given components on axes named e0, e1, … (normalised)."""
    vector = [0.0] * E5_DIM
    for name, value in components.items():
        vector[int(name[1:])] = value
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


QUERY = "weekend plans of the user"
VECTORS = {
    QUERY: unit(e0=1.0),
    # Every query term, rare ones included, and fairly close in meaning.
    "weekend plans: the user visits Kyoto": unit(e0=0.7, e1=0.714),
    # No query word, but the closest in meaning.
    "Saturday: hiking with Ken in the mountains": unit(e0=0.9, e2=0.436),
    # Only "user", a word every note shares, and far in meaning (each on its own topic).
    **{
        note: unit(e0=0.3, **{f"e{axis}": 0.954})
        for note, axis in (
            ("the user likes green tea", 3),
            ("the user lives in Osaka", 20),
            ("the user bought a kettle", 21),
            ("the user reads at night", 22),
        )
    },
    # Nothing in common with the query.
    "receipt 0042, paid in cash": unit(e0=0.1, e4=0.995),
}
EXACT, HIKING = "weekend plans: the user visits Kyoto", "Saturday: hiking with Ken in the mountains"


class HandPlacedEmbedder:
    model, dim, symmetric = "hand-placed", E5_DIM, True

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [(VECTORS | CHAT | DATED | SPOKEN | REGISTER)[t] for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return (VECTORS | CHAT | DATED | SPOKEN | REGISTER)[text]


@pytest.fixture
def hand_placed(postgres_server: PostgresServer, settings: Settings) -> Iterator[TestClient]:
    # A database of its own: its vectors belong to the hand-placed "model", not to the shared test database's.
    own = settings.model_copy(update={"database_url": create_database(postgres_server, f"engram_fusion_{uuid.uuid4().hex[:8]}")})
    with checked_client(create_app(own, embedder=HandPlacedEmbedder())) as client:
        yield client


def search(client: TestClient, base: str, mode: str, query: str = QUERY) -> list[str]:
    response = client.get(base, params={"query": query, "k": 10, "mode": mode})
    assert response.status_code == 200
    return [h["content"] for h in response.json()["items"]]


def store(client: TestClient, texts: list[str]) -> str:
    agent = client.post("/v1/agents", json={"name": f"fusion {uuid.uuid4().hex[:8]}"}).json()
    base = f"/v1/agents/{agent['id']}/archival"
    assert client.post(f"{base}/batch", json={"items": [{"content": t} for t in texts]}).status_code == 201
    return base


def test_strong_lexical_evidence_and_meaning_both_count(hand_placed: TestClient) -> None:
    base = store(hand_placed, [t for t in VECTORS if t != QUERY])
    # All of the query's words and fairly close in meaning: first; then the closest in meaning.
    assert search(hand_placed, base, "hybrid")[:2] == [EXACT, HIKING]
    assert search(hand_placed, base, "vector")[0] == HIKING
    text_only = search(hand_placed, base, "text")
    assert text_only[0] == EXACT and HIKING not in text_only and len(text_only) == 5


def test_weak_lexical_evidence_does_not_outrank_meaning(hand_placed: TestClient) -> None:
    # Without the note that has every query word, the best lexical match is a note sharing only "user", a word
    # every note has. Scored against the best match it would get the full lexical weight and come first; scored
    # against what the query's words could give, it stays weak, and the memory closest in meaning wins.
    base = store(hand_placed, [t for t in VECTORS if t not in (QUERY, EXACT)])
    order = search(hand_placed, base, "hybrid")
    assert order[0] == HIKING, order
    assert order[-1] == "receipt 0042, paid in cash"


def test_an_empty_memory_finds_nothing(hand_placed: TestClient) -> None:
    agent = hand_placed.post("/v1/agents", json={"name": f"empty {uuid.uuid4().hex[:8]}"}).json()
    for mode in ("hybrid", "vector", "text"):
        assert search(hand_placed, f"/v1/agents/{agent['id']}/archival", mode) == []


CONTEST = "the dance at the regional contest"
ASKED = "Gina: What dance did your team do at the regional contest?"
SAID = "Gina: I loved the dance at the regional contest."
REPLY = "Jon: A contemporary piece called Finding Freedom."
# Lines that stand on their own: longer than REPLY_MAX_TOKENS lexical tokens.
LONG_REPLY = "Jon: " + " ".join(f"step{i}" for i in range(60))
LONG_ASKED = ASKED[:-1] + " " + " ".join(f"detail{i}" for i in range(60)) + "?"
SMALL_TALK = (
    "Jon: I got new shoes for practice.",
    "Gina: My store had a busy week.",
    "Jon: The studio needs a new floor.",
    "Gina: Let's catch up soon!",
)
CHAT = {
    CONTEST: unit(e0=1.0),
    ASKED: unit(e0=0.8, e5=0.6),
    SAID: unit(e0=0.8, e7=0.6),
    # The answer shares no word with the question and little meaning: alone it ranks below small talk.
    REPLY: unit(e0=0.35, e6=0.937),
    LONG_REPLY: unit(e0=0.35, e10=0.937),
    LONG_ASKED: unit(e0=0.8, e11=0.6),
    **{line: unit(e0=0.5, **{f"e{16 + i}": 0.866}) for i, line in enumerate(SMALL_TALK)},
}


def test_a_reply_takes_part_of_the_score_of_the_question_before_it(hand_placed: TestClient) -> None:
    base = store(hand_placed, [*SMALL_TALK[:2], ASKED, REPLY, *SMALL_TALK[2:]])
    response = hand_placed.get(base, params={"query": CONTEST, "k": 10})
    order = [h["content"] for h in response.json()["items"]]
    assert order[:2] == [ASKED, REPLY], order
    assert 0 <= response.json()["items"][1]["score"] <= 1
    # The vector and text modes rank each row on its own.
    assert search(hand_placed, base, "vector", CONTEST).index(REPLY) > 2

    async def answered() -> dict[str, str | None]:  # each hit's question, as recollection reads it
        state = runtime(app_of(hand_placed))
        agent_id = uuid.UUID(base.split("/")[3])
        async with state.sessions() as session:
            found = await ArchivalMemory(session, state.embedder).search(agent_id, SearchQuery(CONTEST, k=10))
        content = {p.id: p.content for p, _ in found}
        return {p.content: content.get(hit.answers) if hit.answers else None for p, hit in found}

    assert hand_placed.portal is not None
    questions = hand_placed.portal.call(answered)
    assert questions[REPLY] == ASKED
    assert all(question is None for line, question in questions.items() if line != REPLY)


def test_only_a_question_lends_its_score_to_the_line_after_it(hand_placed: TestClient) -> None:
    # A statement before the same line, and a question after it (not before): neither lifts it.
    base = store(hand_placed, [*SMALL_TALK[:2], SAID, REPLY, ASKED, *SMALL_TALK[2:]])
    order = search(hand_placed, base, "hybrid", CONTEST)
    assert set(order[:2]) == {SAID, ASKED} and order[-1] == REPLY, order


def test_long_lines_stand_on_their_own(hand_placed: TestClient) -> None:
    # A long answer after a question, and a short line after a long "question" (an answer that ends by asking).
    base = store(hand_placed, [*SMALL_TALK[:2], ASKED, LONG_REPLY, LONG_ASKED, REPLY, *SMALL_TALK[2:]])
    order = search(hand_placed, base, "hybrid", CONTEST)
    assert set(order[:2]) == {ASKED, LONG_ASKED} and set(order[-2:]) == {REPLY, LONG_REPLY}, order


# Centring (hybrid.CENTRE_SHARE): a friend's small talk, all in her usual register (axis e30), is closer to a
# question asked in that register than her one line about the topic asked (axis e31), which is nearer to the
# question's own direction once what the candidates share is taken from it.
ABOUT_PETS = "which pets does she keep at home"
PETS = "Mel: Luna the cat and Oliver the dog."
CHATTER = (
    "Mel: Wow, that is so cool!",
    "Mel: Haha, love it!",
    "Mel: Awesome, tell me more!",
    "Mel: So sweet of you!",
    "Mel: That made my day!",
    "Mel: Totally agree with you!",
)
REGISTER = {
    ABOUT_PETS: unit(e30=0.866, e31=0.5),
    PETS: unit(e30=0.45, e31=0.75, e40=0.49),
    **{line: unit(e30=0.95, **{f"e{32 + i}": 0.31}) for i, line in enumerate(CHATTER)},
}


def test_what_the_nearest_rows_share_counts_for_none_of_them(hand_placed: TestClient) -> None:
    base = store(hand_placed, [*CHATTER[:3], PETS, *CHATTER[3:]])
    # No query word in any row: the cosine alone ranks, and small talk comes first by it.
    assert search(hand_placed, base, "vector", ABOUT_PETS)[-1] == PETS
    assert search(hand_placed, base, "hybrid", ABOUT_PETS)[0] == PETS


ON_THE_DAY = "What did Jon find for the studio on 3 May, 2023?"
IN_THE_MONTH = "What did Jon find for the studio in May 2023?"
FOUND = "Jon: I found a great deal on floor mats for the studio!"  # said on 3 May
FOUND_BEFORE = "Jon: I found some old mirrors for the studio."  # said in April, a little closer in meaning
DATED = {
    ON_THE_DAY: unit(e0=1.0),
    IN_THE_MONTH: unit(e0=1.0),
    FOUND: unit(e0=0.8, e12=0.6),
    FOUND_BEFORE: unit(e0=0.85, e13=0.527),
    "What did Jon find for the studio?": unit(e0=1.0),
}


def test_a_memory_from_the_date_the_query_names_gains(hand_placed: TestClient) -> None:
    agent = hand_placed.post("/v1/agents", json={"name": f"dated {uuid.uuid4().hex[:8]}"}).json()
    base = f"/v1/agents/{agent['id']}/archival"
    items = [
        {"content": FOUND_BEFORE, "occurred_at": "2023-04-20T18:00:00Z"},
        {"content": FOUND, "occurred_at": "2023-05-03T23:30:00-04:00"},  # 4 May in UTC: within the day's tolerance
        *({"content": line, "occurred_at": "2023-05-03T12:00:00Z"} for line in SMALL_TALK),
    ]
    assert hand_placed.post(f"{base}/batch", json={"items": items}).status_code == 201
    assert search(hand_placed, base, "hybrid", ON_THE_DAY)[:2] == [FOUND, FOUND_BEFORE]
    assert search(hand_placed, base, "hybrid", IN_THE_MONTH)[:2] == [FOUND, FOUND_BEFORE]
    # Without a date, and in the vector mode, each ranks on its content alone.
    assert search(hand_placed, base, "hybrid", "What did Jon find for the studio?")[:2] == [FOUND_BEFORE, FOUND]
    assert search(hand_placed, base, "vector", ON_THE_DAY)[:2] == [FOUND_BEFORE, FOUND]


ASKED_BY_USER = "How much were the mats?"
IN_FIRST_PERSON = "How much did I pay for the mats?"
IN_SECOND_PERSON = "How much did you say the mats were?"
NAMING_JON = "What did Jon say about the mats?"
USER_SAID, ASSISTANT_SAID = "user: The mats were 40 dollars.", "assistant: The mats were 40 dollars!"
JON_SAID, GINA_SAID = "Jon: The mats were 40 dollars.", "Gina: The mats were 40 dollars!"
SPOKEN = {
    **{q: unit(e0=1.0) for q in (ASKED_BY_USER, IN_FIRST_PERSON, IN_SECOND_PERSON, NAMING_JON)},
    # the other speaker's line a little closer in meaning: on its own it ranks first
    USER_SAID: unit(e0=0.8, e14=0.6),
    ASSISTANT_SAID: unit(e0=0.81, e15=0.586),
    JON_SAID: unit(e0=0.8, e14=0.6),
    GINA_SAID: unit(e0=0.81, e15=0.586),
    "The mats were 40 dollars.": unit(e0=0.8, e14=0.6),
    "The mats were 40 dollars!": unit(e0=0.81, e15=0.586),
}


def test_a_line_by_the_speaker_the_query_names_gains(hand_placed: TestClient) -> None:
    base = store(hand_placed, [USER_SAID, ASSISTANT_SAID, *SMALL_TALK])
    assert search(hand_placed, base, "hybrid", ASKED_BY_USER)[:2] == [ASSISTANT_SAID, USER_SAID]
    assert search(hand_placed, base, "hybrid", IN_FIRST_PERSON)[:2] == [USER_SAID, ASSISTANT_SAID]
    base = store(hand_placed, [GINA_SAID, JON_SAID, *SMALL_TALK])
    assert search(hand_placed, base, "hybrid", NAMING_JON)[:2] == [JON_SAID, GINA_SAID]
    assert search(hand_placed, base, "vector", NAMING_JON)[:2] == [GINA_SAID, JON_SAID]


def test_in_recall_memory_the_speaker_is_the_role(hand_placed: TestClient) -> None:
    agent = hand_placed.post("/v1/agents", json={"name": f"spoken {uuid.uuid4().hex[:8]}"}).json()
    said = [
        {"role": "user", "content": "The mats were 40 dollars."},
        {"role": "assistant", "content": "The mats were 40 dollars!"},
    ]
    small_talk = [{"role": "user", "content": line} for line in SMALL_TALK]
    assert hand_placed.post(f"/v1/agents/{agent['id']}/messages", json={"messages": said + small_talk}).status_code == 201
    base = f"/v1/agents/{agent['id']}/messages"
    user, assistant = said[0]["content"], said[1]["content"]
    assert search(hand_placed, base, "hybrid", ASKED_BY_USER)[:2] == [assistant, user]
    assert search(hand_placed, base, "hybrid", IN_FIRST_PERSON)[:2] == [user, assistant]
    assert search(hand_placed, base, "hybrid", IN_SECOND_PERSON)[:2] == [assistant, user]

    async def asked_by_the_agent(query: str) -> list[str]:  # its conversation_search: "I" is the assistant
        state = runtime(app_of(hand_placed))
        async with state.sessions() as session:
            found = await RecallMemory(session, state.embedder).search(
                uuid.UUID(agent["id"]), SearchQuery(query, k=10, asker="assistant")
            )
        return [m.content for m, _ in found]

    assert hand_placed.portal is not None
    assert hand_placed.portal.call(asked_by_the_agent, IN_FIRST_PERSON)[:2] == [assistant, user]
    assert hand_placed.portal.call(asked_by_the_agent, IN_SECOND_PERSON)[:2] == [user, assistant]
