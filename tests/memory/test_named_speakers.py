"""Who a search query asks about (app/memory/search/named_speakers.py): its words, the user in the first person, the
assistant in the second."""

from app.memory.search.named_speakers import speakers


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
