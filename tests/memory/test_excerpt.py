"""Excerpts of long memories (app/memory/recollection/excerpt.py): the sentences a query is about, within a length."""

from app.memory.recollection.excerpt import CUT_MARK, excerpt
from app.memory.search import lexical


def terms(query: str) -> frozenset[str]:
    return frozenset(lexical.query_terms(query))


ADVICE = (
    "Sure, here are some ideas for your trip. "
    "Start early to avoid the crowds at the museum. "
    "For dinner, Roscioli near Campo de' Fiori is famous for its carbonara. "
    "Book a table a few days ahead, it fills up quickly. "
    "Finally, remember that many shops close on Sunday afternoons."
)


def test_a_text_that_fits_stays_whole() -> None:
    assert excerpt(ADVICE, terms("carbonara"), len(ADVICE)) == ADVICE
    assert excerpt("short", frozenset(), 5) == "short"


def test_the_sentences_around_the_one_sharing_most_of_the_query_within_the_length() -> None:
    shown = excerpt(ADVICE, terms("Which restaurant had the famous carbonara?"), 140)
    assert "Roscioli near Campo de' Fiori is famous for its carbonara." in shown
    assert shown.startswith(f"{CUT_MARK} ") and shown.endswith(f" {CUT_MARK}")
    assert len(shown) <= 0.9 * 140
    # it grows towards the neighbour sharing more of the query (the later one on a tie)
    assert "Book a table" in excerpt(ADVICE, terms("famous carbonara table"), 160)
    assert "crowds" in excerpt(ADVICE, terms("famous carbonara crowds museum"), 160)


def test_a_text_sharing_no_term_is_cut_from_its_start() -> None:
    assert excerpt(ADVICE, terms("quantum chromodynamics"), 60) == ADVICE[:60]
    assert excerpt(ADVICE, frozenset(), 60) == ADVICE[:60]


def test_a_speakers_label_stays_in_front() -> None:
    line = (
        "Caroline: Hey Mel! Long time no see, it has been a busy month. "
        "I went to a LGBTQ support group yesterday and it was so powerful. "
        "The stories people shared made me feel less alone, and I want to go again next week."
    )
    shown = excerpt(line, terms("What support group did Caroline go to?"), 120)
    assert shown == f"Caroline: {CUT_MARK} I went to a LGBTQ support group yesterday and it was so powerful. {CUT_MARK}"


def test_one_sentence_longer_than_the_length_is_cut_and_marked() -> None:
    text = "Nothing here. " + "Emi practises the piano every evening " * 5 + "before dinner."
    shown = excerpt(text, terms("Emi piano"), 80)
    assert shown.startswith(f"{CUT_MARK} Emi practises the piano") and shown.endswith(f" {CUT_MARK}") and len(shown) <= 72


def test_japanese_sentences_and_marked_line_breaks_split_the_text() -> None:
    text = "今日は雨でした。 ¶ 娘のエミは木曜日の五時にピアノを習っています。先生は佐藤さんです。それから散歩に行きました。" * 2
    shown = excerpt(text, terms("エミのピアノのレッスンはいつ？"), 60)
    assert "娘のエミは木曜日の五時にピアノを習っています。" in shown and len(shown) <= 54
