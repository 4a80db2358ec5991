"""Times a search query names relative to the asker's now (app/memory/search/relative_dates.py), as the spans of
named_dates.spans: each widened by a day on both sides."""

from datetime import UTC, date, datetime, timedelta, timezone

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
        # since a time ago: from then up to today
        ("How many pieces have I written since I started writing again three weeks ago?", date(2023, 3, 11), date(2023, 4, 1)),
        ("3週間前から何本書いた？", date(2023, 3, 11), date(2023, 4, 1)),
    ],
)
def test_a_relative_time_is_read_against_the_askers_now(query: str, first: date, last: date) -> None:
    assert spans(query, NOW) == [widened(first, last)]


def widened(first: date, last: date) -> tuple[datetime, datetime]:
    """The span from the start of `first` to the end of `last` (UTC days), widened by TOLERANCE."""
    start = datetime(first.year, first.month, first.day, tzinfo=UTC) - TOLERANCE
    return start, datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1) + TOLERANCE


def test_words_that_name_no_past_time_name_none() -> None:
    for query in (
        "What should I cook today?",  # today's talk is mostly in front of the model already
        "What am I doing this week?",
        "Remind me in two weeks",  # ahead, not ago
        "What did I do 1000 years ago?",  # beyond any memory
        "What did I do 200 years ago?",  # over MAX_COUNT
        "in the past 0 days",  # no time at all
        "0日前",
        "last",
        # a part of something named, not a time before now
        "my last year of college",
        "the last week of June",
        "the last three days of our trip",
        "the last Friday of the month",
        "his last week",
        "5月3日前に届く？",  # before the 3rd of May
        "誕生日の3日前に",  # three days before a birthday
        "10日前後で届く",  # in about ten days
        "1年前期の授業",  # a first year's first term
        "この2年生",  # this second-year student
        "数日前",  # no number to read
    ):
        assert spans(query, NOW) == [], query


def within(first: date, last: date) -> list[tuple[datetime, datetime]]:
    start = datetime(first.year, first.month, first.day, tzinfo=UTC) - TOLERANCE
    return [(start, datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1) + TOLERANCE)]


def test_the_calendar_turns_at_mondays_month_ends_and_years() -> None:
    sunday, monday = datetime(2023, 4, 2, 9, tzinfo=UTC), datetime(2023, 4, 3, 9, tzinfo=UTC)
    assert spans("last week", sunday) == within(date(2023, 3, 20), date(2023, 3, 26))
    assert spans("last week", monday) == within(date(2023, 3, 27), date(2023, 4, 2))
    assert spans("last weekend", sunday) == within(date(2023, 3, 25), date(2023, 3, 26))
    assert spans("last weekend", monday) == within(date(2023, 4, 1), date(2023, 4, 2))
    march_31 = datetime(2023, 3, 31, 9, tzinfo=UTC)
    assert spans("a month ago", march_31) == within(date(2023, 2, 13), date(2023, 3, 15))  # around 28 February
    assert spans("in the last month", march_31) == within(date(2023, 2, 28), date(2023, 3, 31))
    january = datetime(2024, 1, 10, tzinfo=UTC)
    assert spans("last month", january) == within(date(2023, 12, 1), date(2023, 12, 31))
    assert spans("先々月", january) == within(date(2023, 11, 1), date(2023, 11, 30))
    # 28 February 2023 (no 29th), and half a year around it
    assert spans("a year ago", datetime(2024, 2, 29, tzinfo=UTC)) == within(date(2022, 8, 30), date(2023, 8, 29))


def test_a_now_at_the_ends_of_the_calendar_names_nothing_it_cannot() -> None:
    for now in (datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)):
        for query in (
            "last year",
            "去年",
            "last week",
            "先週",
            "last Friday",
            "yesterday",
            "3 days ago",
            "in the past two weeks",
        ):
            for start, stop in spans(query, now):
                assert start < stop, (query, now)


def test_relative_and_absolute_dates_count_alike() -> None:
    found = spans("What did Joanna finish last Friday, on 23 January, 2022?", NOW)
    assert found == [
        (datetime(2023, 3, 31, tzinfo=UTC) - TOLERANCE, datetime(2023, 4, 1, tzinfo=UTC) + TOLERANCE),
        (datetime(2022, 1, 23, tzinfo=UTC) - TOLERANCE, datetime(2022, 1, 24, tzinfo=UTC) + TOLERANCE),
    ]


def test_without_a_now_the_current_time_is_the_askers() -> None:
    before = datetime.now(UTC).date()
    found = spans("What did I say yesterday?")
    after = datetime.now(UTC).date()  # a test run across midnight reads either day
    assert found in [within(today - timedelta(days=1), today - timedelta(days=1)) for today in (before, after)]


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        # a day or month named without its year: the latest one up to today (today Saturday 1 April 2023)
        ("What did I do on 6 March?", date(2023, 3, 6), date(2023, 3, 6)),
        ("What did I do on March 6th?", date(2023, 3, 6), date(2023, 3, 6)),
        ("Where was I on 6 June?", date(2022, 6, 6), date(2022, 6, 6)),
        ("3月6日は何をした？", date(2023, 3, 6), date(2023, 3, 6)),
        ("What did I read in February?", date(2023, 2, 1), date(2023, 2, 28)),
        ("2月は何をした？", date(2023, 2, 1), date(2023, 2, 28)),
        ("What did I do in April?", date(2023, 4, 1), date(2023, 4, 30)),  # this one, while it lasts
        # a weekday: the latest before today; 先週の月曜日: last week's
        ("What did I cook on Monday?", date(2023, 3, 27), date(2023, 3, 27)),
        ("月曜日に何をした？", date(2023, 3, 27), date(2023, 3, 27)),
        ("私は月曜日に何をした？", date(2023, 3, 27), date(2023, 3, 27)),
        ("先週の月曜日に何をした？", date(2023, 3, 20), date(2023, 3, 20)),
        ("先週の金曜日何してた？", date(2023, 3, 24), date(2023, 3, 24)),
        ("What did we do over the weekend?", date(2023, 4, 1), date(2023, 4, 1)),  # today a Saturday: this one
    ],
)
def test_a_day_month_or_weekday_without_a_year_is_the_latest_one(query: str, first: date, last: date) -> None:
    assert spans(query, NOW) == [widened(first, last)]


def test_named_with_its_year_or_ahead_it_is_not_read_as_the_latest() -> None:
    assert spans("What did I do on 6 March 2021?", NOW) == [widened(date(2021, 3, 6), date(2021, 3, 6))]
    for query in ("来週の月曜日に何する？", "今週の金曜日は？", "毎週月曜日に走ってる", "5月3日前に届く？"):
        assert spans(query, NOW) == [], query


def test_over_the_weekend_is_the_last_one_on_a_weekday() -> None:
    monday = datetime(2023, 4, 3, 9, tzinfo=UTC)
    assert spans("What did I do over the weekend?", monday) == [widened(date(2023, 4, 1), date(2023, 4, 2))]
    assert spans("What did I do last weekend?", NOW) == [widened(date(2023, 3, 25), date(2023, 3, 26))]


def test_days_are_the_askers_own_when_now_names_its_zone() -> None:
    # 09:30 on Wednesday 12 June in Tokyo is still the 12th there, though 00:30 UTC: yesterday is Tokyo's 11 June
    tokyo = timezone(timedelta(hours=9))
    now = datetime(2024, 6, 12, 9, 30, tzinfo=tokyo)
    yesterday = (datetime(2024, 6, 11, tzinfo=tokyo), datetime(2024, 6, 12, tzinfo=tokyo))
    assert spans("What did I eat yesterday?", now, widen=False) == [yesterday]
    assert spans("What did I eat yesterday?", now) == [(yesterday[0] - TOLERANCE, yesterday[1] + TOLERANCE)]
    assert spans("What did I do on 6 June 2024?", now, widen=False) == [
        (datetime(2024, 6, 6, tzinfo=tokyo), datetime(2024, 6, 7, tzinfo=tokyo))
    ]
