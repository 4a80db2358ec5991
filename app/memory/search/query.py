"""What a search asks besides its vector: the lexical terms, the dates and the speakers its text names, and how it
ranks (`Mode`)."""

from datetime import datetime
from typing import Literal, TypedDict

from app.memory.search import lexical, named_dates, named_speakers

Mode = Literal["hybrid", "vector", "text"]


class QuerySignals(TypedDict):
    terms: list[str]
    dates: list[tuple[datetime, datetime]]
    speakers: list[str]


def what_the_query_names(query: str, asker: named_speakers.Asker) -> QuerySignals:
    """What the hybrid statement ranks by besides the query's vector: its lexical terms, the dates and the speakers
    it names (`asker`: who wrote it, named_speakers.speakers)."""
    return {
        "terms": lexical.query_terms(query),
        "dates": named_dates.spans(query),
        "speakers": named_speakers.speakers(query, asker),
    }
