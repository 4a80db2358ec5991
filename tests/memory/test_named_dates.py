"""The dates a search query names (app/memory/search/named_dates.py): which words are dates, and the span each stands for."""

from datetime import UTC, datetime

import pytest

from app.memory.search.named_dates import TOLERANCE, spans


def utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


MAY_3 = [(utc(2023, 5, 3) - TOLERANCE, utc(2023, 5, 4) + TOLERANCE)]


@pytest.mark.parametrize(
    "query",
    [
        "What did Gina find on 3 May, 2023?",
        "What did Gina find on May 3, 2023?",
        "on the 3rd of May 2023",
        "on May 3rd 2023",
        "2023-05-03 のメモ",
        "2023年5月3日に何を買った？",
        "２０２３年５月３日に何を買った？",  # full-width digits
    ],
)
def test_a_named_day_is_that_day_give_or_take_one(query: str) -> None:
    assert spans(query) == MAY_3


def test_a_named_month_or_year_is_the_whole_of_it() -> None:
    may = [(utc(2023, 5, 1) - TOLERANCE, utc(2023, 6, 1) + TOLERANCE)]
    assert spans("What setback did Melanie face in May 2023?") == may
    assert spans("2023年5月の旅行は？") == may
    assert spans("What happened in December, 2023?") == [(utc(2023, 12, 1) - TOLERANCE, utc(2024, 1, 1) + TOLERANCE)]
    year = [(utc(2023, 1, 1) - TOLERANCE, utc(2024, 1, 1) + TOLERANCE)]
    assert spans("How many times did she go to the beach in 2023?") == year
    assert spans("2023年に読んだ本は？") == year


def test_words_that_are_not_dates_name_none() -> None:
    for query in (
        "What may I bring to the party?",  # the verb, not the month
        "What is my locker number, 2023?",  # a number alone
        "music of the 1990s",
        "on 31 February, 2023",  # no such day
        "2023-13-01",
        "What have I read since 2020?",  # not the year 2020 itself
    ):
        assert spans(query) == [], query


def test_every_date_of_a_query_counts_once() -> None:
    assert spans("Between 1 May, 2023 and June 2023?") == [
        (utc(2023, 5, 1) - TOLERANCE, utc(2023, 5, 2) + TOLERANCE),
        (utc(2023, 6, 1) - TOLERANCE, utc(2023, 7, 1) + TOLERANCE),
    ]
