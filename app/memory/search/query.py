"""A search's settings as one value, carried unchanged from whoever asks (a router, an agent's tool, recollection,
a bench) through the memory's service and repository to the SQL statement (app/memory/search/hybrid.py)."""

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Literal

from app.memory.search import lexical, named_dates, named_speakers

# hybrid: the fused ranking; vector, text: each signal alone (baselines, and the API's `mode`)
Mode = Literal["hybrid", "vector", "text"]


@dataclass(frozen=True)
class SearchQuery:
    """What is asked and who asks it (`asker`: the user, or the agent itself searching for the user), how many hits
    (`k`), the rows stored after / before a moment, and how they are ranked. What the statement ranks by besides the
    query's vector — the text's lexical terms, the dates and the speakers it names — is read off the text."""

    text: str
    k: int = 5
    after: datetime | None = None
    before: datetime | None = None
    mode: Mode = "hybrid"
    asker: named_speakers.Asker = "user"
    now: datetime | None = None  # the asker's, against which "yesterday" or "two weeks ago" is read; None: the current time

    @cached_property
    def terms(self) -> list[str]:
        return lexical.query_terms(self.text)

    @cached_property
    def window(self) -> list[tuple[datetime, datetime]]:
        """The times the text names, absolute or relative to `now`, as the asker's calendar (`now`'s zone) has them."""
        return named_dates.spans(self.text, self.now, widen=False)

    @cached_property
    def dates(self) -> list[tuple[datetime, datetime]]:
        """The same spans widened for an asker's unknown zone (named_dates.widened): what the search lifts."""
        return named_dates.widened(self.window)

    @cached_property
    def speakers(self) -> list[str]:
        """Those the text names as speakers, from `asker`'s side (named_speakers.speakers)."""
        return named_speakers.speakers(self.text, self.asker)
