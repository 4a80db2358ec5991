"""The times a search query names relative to its asker's now, as spans: "yesterday", "two weeks ago", "last
month", "last Saturday", "in the past two weeks", 昨日, 先週, 3日前, この2週間 (app/memory/search/named_dates.py reads
the absolute ones; named_dates.spans widens both alike).

`now` is the asker's: the moment a recollection stands at (its `as_of`), else the current time. Like a named
date, a relative one picks out what was *said* then: a memory's `occurred_at` is when it was told, and "What did I
do last weekend?" is answered by what the user said last weekend. What is named loosely is read as loosely: "two
months ago" is the month around that day, "two weeks ago" the week around it; "last week", "last month" and "last
year" are the calendar's (weeks from Monday) and "the last week" the seven days up to today, "last weekend" the latest
Saturday and Sunday before today. "Today" and "this week" name no span of their own: what was said today is mostly
in front of the model already, and a bonus for all of it would push the memory asked about down (a day's widening
for time zones still reaches into today from yesterday)."""

import calendar
import contextlib
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, tzinfo

WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_WORDS = "one two three four five six seven eight nine ten eleven twelve".split()
NUMBER_WORDS = {word: n for n, word in enumerate(_WORDS, start=1)}
NUMBER_WORDS |= {"a": 1, "an": 1, "a couple of": 2, "a couple": 2, "couple of": 2}
KANJI_DIGITS = {c: n for n, c in enumerate("一二三四五六七八九", start=1)}
_NUMBER = r"(\d{1,3}|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + ")"
_KANJI_NUMBER = r"(\d{1,3}|[一二三四五六七八九十]{1,3})"
# "N units ago" is the unit around that moment: half of it on either side
_AROUND = {"day": timedelta(0), "week": timedelta(days=3), "month": timedelta(days=15), "year": timedelta(days=182)}
_JAPANESE_UNITS = {
    "日": "day",
    "週間": "week",
    "か月": "month",
    "ヶ月": "month",
    "カ月": "month",
    "ヵ月": "month",
    "ケ月": "month",
    "年": "year",
}
_JAPANESE_UNIT = "(" + "|".join(_JAPANESE_UNITS) + ")"

Span = tuple[datetime, datetime]
MAX_COUNT = 100  # "1000 years ago" is beyond any memory


def spans(text: str, now: datetime) -> list[tuple[int, int, Span]]:
    """The spans of the relative times `text` names (already NFKC-normalised), each with where it stands in the text.
    Days are the calendar's of `now`'s zone (an `as_of` sent as "…T09:30+09:00" reads "yesterday" as the asker's),
    UTC's for a time without one. A time outside the calendar (`now` near year 1 or 9999) names none."""
    zone = now.tzinfo or UTC
    today = now.astimezone(zone).date()
    found: list[tuple[int, int, Span]] = []
    for pattern, read in _PATTERNS:
        for match in pattern.finditer(text):
            if any(start <= match.start() < end for start, end, _ in found):
                continue
            with contextlib.suppress(ValueError, OverflowError):
                span = read(match, today)
                if span is not None:
                    start, end = (in_zone(moment, zone) for moment in span)
                    found.append((match.start(), match.end(), (start, end)))
    return found


def in_zone(midnight: datetime, zone: tzinfo) -> datetime:
    """A reader's midnight (of the calendar, written in UTC) as that midnight in `zone`, in UTC."""
    return midnight.replace(tzinfo=zone).astimezone(UTC)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _days(first: date, last: date) -> Span:
    """From the start of `first` to the end of `last`."""
    return _midnight(first), _midnight(last) + timedelta(days=1)


def _months_back(day: date, months: int) -> date:
    """The same day `months` earlier, or that month's last day if it is shorter."""
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _back(today: date, count: int, unit: str) -> date:
    if unit == "day":
        return today - timedelta(days=count)
    if unit == "week":
        return today - timedelta(weeks=count)
    return _months_back(today, count * (12 if unit == "year" else 1))


def _ago(today: date, count: int, unit: str) -> Span:
    """`count` units before today, as the unit around that day."""
    moment = _back(today, count, unit)
    return _days(moment - _AROUND[unit], moment + _AROUND[unit])


def _past(today: date, count: int, unit: str) -> Span:
    """The last `count` units up to today ("in the past two weeks")."""
    return _days(_back(today, count, unit), today)


def _last(today: date, unit: str, steps: int = 1) -> Span:
    """The calendar's week (from Monday), month or year `steps` before this one; a weekend: the latest Saturday and
    Sunday before today."""
    if unit == "weekend":
        sunday = today - timedelta(days=today.weekday() + 1)
        return _days(sunday - timedelta(days=1), sunday)
    if unit == "week":
        monday = today - timedelta(days=today.weekday(), weeks=steps)
        return _days(monday, monday + timedelta(days=6))
    if unit == "month":
        first = _months_back(today.replace(day=1), steps)
        return _midnight(first), _midnight(_months_back(today.replace(day=1), steps - 1))
    year = today.year - steps
    return _midnight(date(year, 1, 1)), _midnight(date(year + 1, 1, 1))


def _calendar_or_rolling(match: re.Match[str], today: date) -> Span | None:
    """ "last week" is the calendar's, "the last week" (as "the past week") the seven days up to today, and "my last
    year" (of school) no time at all."""
    before, unit = (match[1] or "").lower(), match[2].lower()
    if before == "the":
        return _past(today, 1, unit)
    return None if before else _last(today, unit)


def _last_weekday(today: date, weekday: int) -> Span:
    """The latest such day before today (1 to 7 days ago)."""
    day = today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
    return _days(day, day)


def _the_weekend(today: date) -> Span:
    """The weekend under way (its Saturday up to today), or, on a weekday, the last one."""
    if today.weekday() >= 5:
        return _days(today - timedelta(days=today.weekday() - 5), today)
    return _last(today, "weekend")


def _weekday_of_last_week(today: date, weekday: int) -> Span:
    """先週の月曜日: that day of the calendar's previous week."""
    monday = today - timedelta(days=today.weekday(), weeks=1)
    return _days(monday + timedelta(days=weekday), monday + timedelta(days=weekday))


def _latest_day(today: date, month: int, day: int) -> Span:
    """ "on 6 June" with no year: the latest 6 June up to today."""
    named = date(today.year, month, day) if (month, day) <= (today.month, today.day) else date(today.year - 1, month, day)
    return _days(named, named)


def _latest_month(today: date, month: int) -> Span:
    """ "in June" with no year: the latest June begun by today (this one while it lasts)."""
    year = today.year if month <= today.month else today.year - 1
    first = date(year, month, 1)
    return _days(first, date(year, month, calendar.monthrange(year, month)[1]))


def _count(word: str) -> int:
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word)
    if word in NUMBER_WORDS:
        return NUMBER_WORDS[word]
    tens, _, units = word.rpartition("十")  # 十, 二十, 十二, 二十三; "十" alone or as a leading digit is ten
    if "十" in word:
        return (KANJI_DIGITS.get(tens, 1) if tens else 1) * 10 + KANJI_DIGITS.get(units, 0)
    return KANJI_DIGITS.get(word, 0)


def _unit(word: str) -> str:
    return _JAPANESE_UNITS.get(word) or word.lower().rstrip("s")


Reader = Callable[[re.Match[str], date], Span | None]


def _counted(span: Callable[[date, int, str], Span]) -> Reader:
    """A reader of "N units" (the match's first group the number, its second the unit) as `span` takes them; a
    count of none or over MAX_COUNT names no time."""

    def read(match: re.Match[str], today: date) -> Span | None:
        count = _count(match[1])
        return span(today, count, _unit(match[2])) if 0 < count <= MAX_COUNT else None

    return read


# "the last week of June", "the last three days of our trip", "last Friday of the month": a part of something named,
# not a time before now
_NOT_OF = r"(?!\s+(?:of|in|at|before|after)\b)"
_POSSESSIVE = r"(?:(the|my|his|her|its|our|their|your)\s+)?"
# "3日前": not "5月3日前" (before the 3rd of May) nor "誕生日の3日前" (three days before a birthday)
_JAPANESE_AGO = rf"(?<![\d月の]){_KANJI_NUMBER}{_JAPANESE_UNIT}前"
_MONTHS = "january february march april may june july august september october november december".split()
_MONTH = "|".join(_MONTHS)
_WEEKDAY = "|".join(WEEKDAYS)
_JAPANESE_WEEKDAYS = "月火水木金土日"
_NO_YEAR = r"(?!,?\s*\d{4})(?!\s*年)"  # "6 June 2024" names its year: app/memory/search/named_dates.py reads it
_PATTERNS: tuple[tuple[re.Pattern[str], Reader], ...] = (
    # longer phrases first: "the day before yesterday" holds "yesterday", 一昨日 holds 昨日, 先週の月曜日 holds 先週
    (re.compile(r"\bthe day before yesterday\b|一昨日|おととい", re.I), lambda m, today: _ago(today, 2, "day")),
    (re.compile(r"\byesterday\b|\blast night\b|昨日|きのう|昨晩|昨夜", re.I), lambda m, today: _ago(today, 1, "day")),
    (re.compile(r"一昨年|おととし"), lambda m, today: _last(today, "year", 2)),
    (re.compile(r"去年|昨年"), lambda m, today: _last(today, "year")),
    (re.compile(r"先々週"), lambda m, today: _last(today, "week", 2)),
    (re.compile(r"先々月"), lambda m, today: _last(today, "month", 2)),
    (re.compile(r"先週末"), lambda m, today: _last(today, "weekend")),
    (
        re.compile(rf"先週の?([{_JAPANESE_WEEKDAYS}])曜"),
        lambda m, today: _weekday_of_last_week(today, _JAPANESE_WEEKDAYS.index(m[1])),
    ),
    (re.compile(r"先週"), lambda m, today: _last(today, "week")),
    (re.compile(r"先月"), lambda m, today: _last(today, "month")),
    # "since I started again three weeks ago", "3週間前から": from then up to today
    (re.compile(rf"\bsince\b[^.?!;]{{0,80}}?\b{_NUMBER}\s+(day|week|month|year)s?\s+ago\b", re.I), _counted(_past)),
    (re.compile(rf"{_JAPANESE_AGO}から"), _counted(_past)),
    (re.compile(rf"\b{_NUMBER}\s+(day|week|month|year)s?\s+ago\b", re.I), _counted(_ago)),
    # not "10日前後" (about ten days), "1年前期" (a first year's first term)
    (re.compile(rf"{_JAPANESE_AGO}(?![後期半])"), _counted(_ago)),
    (re.compile(rf"\b(?:the\s+)?(?:past|last)\s+{_NUMBER}\s+(day|week|month|year)s?\b{_NOT_OF}", re.I), _counted(_past)),
    # not "この2年生" (this second-year student)
    (re.compile(rf"(?:この|ここ|過去)\s*{_KANJI_NUMBER}\s*{_JAPANESE_UNIT}(?!生)"), _counted(_past)),
    (
        re.compile(rf"\b(?:last|this past)\s+({'|'.join(WEEKDAYS)})\b{_NOT_OF}", re.I),
        lambda m, today: _last_weekday(today, WEEKDAYS.index(m[1].lower())),
    ),
    (re.compile(rf"\b(?:last|this past|the past)\s+weekend\b{_NOT_OF}", re.I), lambda m, today: _last(today, "weekend")),
    # "over the weekend": the one under way on a Saturday or Sunday, else the last
    (re.compile(rf"\b(?:over|on|at)\s+the\s+weekend\b{_NOT_OF}", re.I), lambda m, today: _the_weekend(today)),
    # a day or month named without a year, or a weekday with nothing before it: the latest one (questions to memory
    # ask about the past; "next Monday", 来週の月曜日 name none)
    (
        re.compile(rf"\bon\s+({_WEEKDAY})\b{_NOT_OF}", re.I),
        lambda m, today: _last_weekday(today, WEEKDAYS.index(m[1].lower())),
    ),
    (
        # not 来週の月曜日, 今週の, 毎週 (ahead, or every week), 先週の (read above)
        re.compile(rf"(?<![来今毎先]週)(?<![来今毎先]週の)(?<!毎)([{_JAPANESE_WEEKDAYS}])曜日?(?:に|は|の)"),
        lambda m, today: _last_weekday(today, _JAPANESE_WEEKDAYS.index(m[1])),
    ),
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b{_NO_YEAR}", re.I),
        lambda m, today: _latest_day(today, _MONTHS.index(m[2].lower()) + 1, int(m[1])),
    ),
    (
        re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b{_NO_YEAR}", re.I),
        lambda m, today: _latest_day(today, _MONTHS.index(m[1].lower()) + 1, int(m[2])),
    ),
    (
        re.compile(r"(?<![年\d])(\d{1,2})月(\d{1,2})日(?!前)"),  # not 5月3日前 (before then)
        lambda m, today: _latest_day(today, int(m[1]), int(m[2])),
    ),
    (
        re.compile(rf"\b(?:in|during)\s+({_MONTH})\b{_NO_YEAR}", re.I),
        lambda m, today: _latest_month(today, _MONTHS.index(m[1].lower()) + 1),
    ),
    (
        re.compile(r"(?<![年\d])(\d{1,2})月(?:に|は|の|中)"),
        lambda m, today: _latest_month(today, int(m[1])),
    ),
    (re.compile(rf"\b{_POSSESSIVE}last\s+(week|month|year)\b{_NOT_OF}", re.I), _calendar_or_rolling),
    (re.compile(rf"\b(?:this\s+)?past\s+(week|month|year)\b{_NOT_OF}", re.I), lambda m, today: _past(today, 1, m[1].lower())),
)
