"""The dates a search query names, as spans of time: "on 3 May, 2023", "May 3, 2023", "2023-05-03", "2023年5月3日"
(a day), "in May 2023", "2023年5月" (a month), "in 2023", "2023年に" (a year).

A memory from the named time is more likely the one asked about ("What did Gina find for her store on 1 February,
2023?"), and its text rarely says the date: the hybrid search adds a share to the score of rows whose `occurred_at`
falls in a span (app/memory/search/hybrid.py). Each span is widened by a day on both sides: the service does not know the
asker's time zone, and what was said "on the 23rd" may be stored on the 24th in UTC.

Relative ones ("yesterday", "two weeks ago", 先週) are read against the asker's now by
app/memory/search/relative_dates.py, and widened alike. Not a date library: dateparser's `search_dates` returns
points without their granularity ("in 2023" comes back as one day), reads the verb "may" as a month, and takes up to
6 ms a query; these patterns take microseconds."""

import contextlib
import re
import unicodedata
from datetime import UTC, datetime, timedelta

from app.memory.search import relative_dates

MONTHS = "january february march april may june july august september october november december".split()
_MONTH = "|".join(MONTHS)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
TOLERANCE = timedelta(days=1)  # the asker's time zone is not known

# (granularity, pattern, year/month/day groups) — day patterns first: a month pattern must not take their text.
_PATTERNS = (
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH}),?\s+(\d{{4}})\b", re.I), (3, 2, 1)),
    ("day", re.compile(rf"\b({_MONTH})\s+{_DAY},?\s+(\d{{4}})\b", re.I), (3, 1, 2)),
    ("day", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), (1, 2, 3)),
    ("day", re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日"), (1, 2, 3)),
    ("month", re.compile(rf"\b({_MONTH}),?\s+(\d{{4}})\b", re.I), (2, 1, None)),
    ("month", re.compile(r"(\d{4})年(\d{1,2})月"), (1, 2, None)),
    ("year", re.compile(r"\b(?:in|of|during)\s+(\d{4})\b", re.I), (1, None, None)),
    ("year", re.compile(r"(\d{4})年"), (1, None, None)),
)


def spans(query: str, now: datetime | None = None, *, widen: bool = True) -> list[tuple[datetime, datetime]]:
    """The half-open UTC spans [start, end) of the dates `query` names, absolute ones and those relative to `now`
    (the asker's; None: the current time), `widened` unless not `widen`; days are those of `now`'s zone (UTC
    without one)."""
    text = unicodedata.normalize("NFKC", query)
    now = now or datetime.now(UTC)
    relative = relative_dates.spans(text, now)
    found = [span for _, _, span in relative]
    taken = [(start, end) for start, end, _ in relative]
    for granularity, pattern, (y, m, d) in _PATTERNS:
        for match in pattern.finditer(text):
            if any(start <= match.start() < end for start, end in taken):
                continue
            taken.append(match.span())  # even when it is no date: "31 February, 2023" does not name February
            with contextlib.suppress(ValueError, OverflowError):  # "31 February", month 13, year 0 or 9999: no span
                start, end = _span(granularity, int(match[y]), _month(match[m]) if m else 1, int(match[d]) if d else 1)
                found.append((relative_dates.in_zone(start, now.tzinfo or UTC), relative_dates.in_zone(end, now.tzinfo or UTC)))
    return widened(found) if widen else found


def widened(named: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Each span widened by TOLERANCE on both sides: what was said "on the 23rd" may be stored on the 24th in UTC. A
    span at the calendar's ends that cannot be widened names nothing."""
    out = []
    for start, end in named:
        with contextlib.suppress(OverflowError):
            out.append((start - TOLERANCE, end + TOLERANCE))
    return out


def _month(value: str) -> int:
    return int(value) if value.isdigit() else MONTHS.index(value.lower()) + 1


def _span(granularity: str, year: int, month: int, day: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, day, tzinfo=UTC)
    if granularity == "day":
        return start, start + timedelta(days=1)
    if granularity == "month":
        return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, datetime(year + 1, 1, 1, tzinfo=UTC)
