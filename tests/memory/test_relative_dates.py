"""Times a search query names relative to the asker's now (app/memory/search/relative_dates.py), as the spans of
named_dates.spans: each widened by a day on both sides."""

from datetime import UTC, date, datetime, timedelta

import pytest

from app.memory.search.named_dates import TOLERANCE, spans

NOW = datetime(2023, 4, 1, 16, 8, tzinfo=UTC)  # a Saturday


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("What did I cook yesterday?", date(2023, 3, 31), date(2023, 3, 31)),
        ("昨日は何を食べた？", date(2023, 3, 31), date(2023, 3, 31)),
        ("What did I do the day before yesterday?", date(2023, 3, 30), date(2023, 3, 30)),
        ("一昨日の話", date(2023, 3, 30), date(2023, 3, 30)),
        ("Who did I meet 3 days ago?", date(2023, 3, 29), date(2023, 3, 29)),
        ("3日前に会ったのは誰？", date(2023, 3, 29), date(2023, 3, 29)),
        ("十日前", date(2023, 3, 22), date(2023, 3, 22)),
        # loosely named, loosely read: the week around that day, the month around it
        ("What did I buy two weeks ago?", date(2023, 3, 15), date(2023, 3, 21)),
        ("a couple of weeks ago", date(2023, 3, 15), date(2023, 3, 21)),
        ("What did I do with Rachel on the Wednesday two months ago?", date(2023, 1, 17), date(2023, 2, 16)),
        ("2か月前の旅行", date(2023, 1, 17), date(2023, 2, 16)),
        # the calendar's week (from Monday), month and year
        ("Where did I eat last week?", date(2023, 3, 20), date(2023, 3, 26)),
        ("先週どこで食べた？", date(2023, 3, 20), date(2023, 3, 26)),
        ("What did I read last month?", date(2023, 3, 1), date(2023, 3, 31)),
        ("先月", date(2023, 3, 1), date(2023, 3, 31)),
        ("Where did we go last year?", date(2022, 1, 1), date(2022, 12, 31)),
        ("去年の夏", date(2022, 1, 1), date(2022, 12, 31)),
        # the latest weekend, or weekday, before today (today a Saturday: a week ago)
        ("Where did we go last weekend?", date(2023, 3, 25), date(2023, 3, 26)),
        ("先週末は何をした？", date(2023, 3, 25), date(2023, 3, 26)),
        ("What did I bake last Saturday?", date(2023, 3, 25), date(2023, 3, 25)),
        ("What did I bake last Thursday?", date(2023, 3, 30), date(2023, 3, 30)),
        # the last units up to today
        ("How many times did I bake egg tarts in the past two weeks?", date(2023, 3, 18), date(2023, 4, 1)),
        ("この2週間で何回走った？", date(2023, 3, 18), date(2023, 4, 1)),
        ("in the past week", date(2023, 3, 25), date(2023, 4, 1)),
    ],
)
def test_a_relative_time_is_read_against_the_askers_now(query: str, first: date, last: date) -> None:
    start = datetime(first.year, first.month, first.day, tzinfo=UTC) - TOLERANCE
    stop = datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1) + TOLERANCE
    assert spans(query, NOW) == [(start, stop)]


def test_words_that_name_no_past_time_name_none() -> None:
    for query in (
        "What should I cook today?",  # today's talk is mostly in front of the model already
        "What am I doing this week?",
        "Remind me in two weeks",  # ahead, not ago
        "5月3日前に届く？",  # before the 3rd of May, not three days ago
        "数日前",  # no number to read
        "What did I do 1000 years ago?",  # beyond any memory
        "last",
    ):
        assert spans(query, NOW) == [], query


def test_relative_and_absolute_dates_count_alike() -> None:
    found = spans("What did Joanna finish last Friday, on 23 January, 2022?", NOW)
    assert found == [
        (datetime(2023, 3, 31, tzinfo=UTC) - TOLERANCE, datetime(2023, 4, 1, tzinfo=UTC) + TOLERANCE),
        (datetime(2022, 1, 23, tzinfo=UTC) - TOLERANCE, datetime(2022, 1, 24, tzinfo=UTC) + TOLERANCE),
    ]


def test_without_a_now_the_current_time_is_the_askers() -> None:
    today = datetime.now(UTC).date()
    yesterday = datetime(today.year, today.month, today.day, tzinfo=UTC) - timedelta(days=1)
    assert spans("What did I say yesterday?") == [(yesterday - TOLERANCE, yesterday + timedelta(days=1) + TOLERANCE)]
