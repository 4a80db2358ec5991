"""Who a search query asks about (app/memory/search/named_speakers.py): its words, the user in the first person, the
assistant in the second."""

import uuid

from app.memory.search.named_speakers import PASSAGE_SPEAKER_SQL, speakers
from tests.support.database import run_sql


def test_a_name_in_the_query_is_a_speaker_it_may_ask_about() -> None:
    assert "caroline" in speakers("What did Caroline paint last summer?")
    assert "user" not in speakers("What did Caroline paint last summer?")


def test_the_first_person_asks_about_the_user_and_the_second_about_the_assistant() -> None:
    assert {"user"} <= set(speakers("How much did I earn at the market?"))
    assert {"user"} <= set(speakers("What's my sister's name?"))
    assert {"user"} <= set(speakers("私の妹の名前は？"))
    assert "assistant" in speakers("What did you recommend for Denver?")
    assert "assistant" not in speakers("How much did I earn at the market?")
    assert "user" not in speakers("Is it raining in Kyoto?")  # "it", "in": no first person


def test_for_the_agents_own_search_i_is_the_assistant() -> None:
    assert "assistant" in speakers("What did I recommend for Denver?", asker="assistant")
    assert "user" not in speakers("What did I recommend for Denver?", asker="assistant")
    assert "user" in speakers("What did you say about your sister?", asker="assistant")


def test_a_passages_speaker_is_its_lines_label_or_its_facts_subject(database_url: str) -> None:
    rows = [
        ("Caroline: I went to the support group yesterday.", False),
        ("Caroline attended an LGBTQ support group.", True),
        ("Melanie's kids love the beach.", True),
        ("Melanie’s kids love the beach.", True),
        ("User works as a data engineer in Yokohama.", True),
        ("The user's wife is Emi.", True),
        ("Nate: I adopted a turtle.", True),  # a line stored as a fact: its label
        ("The user's cat is called Mochi.", False),  # stored as given, no label: no speaker
    ]
    values = ", ".join(f"(:c{i}, CAST(:s{i} AS uuid[]))" for i in range(len(rows)))
    params: dict[str, object] = {f"c{i}": content for i, (content, _) in enumerate(rows)}
    params |= {f"s{i}": [str(uuid.uuid4())] if fact else [] for i, (_, fact) in enumerate(rows)}
    read = run_sql(database_url, f"SELECT {PASSAGE_SPEAKER_SQL} FROM (VALUES {values}) AS t(content, sources)", params)
    assert [r[0] for r in read] == [
        "caroline",
        "caroline",
        "melanie",
        "melanie",
        "user",
        "user",
        "nate",
        "the user's cat is called mochi.",
    ]
