"""A hit as recollection weighs it and shows it: what the gate judges it on (its margin, coverage and fused score),
where it stands among its memory's rows, and how the section writes it: under a heading per day (and memory, for
earlier messages), one line each, as data (app/memory/recollection/prompt_text.py), a long memory as an excerpt within
its share of the budget."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from app.memory.kinds import BY_NAME, Kind
from app.memory.recollection.excerpt import excerpt
from app.memory.recollection.gate import MIN_COVERAGE, MIN_MARGIN
from app.memory.recollection.prompt_text import marked, one_line

BUDGET_CHARS = 1500  # of all of them, by default (the chat path's, ENGRAM_RECOLLECTION_CHARS)
# One memory is shown in at most this share of the budget, a longer one as an excerpt (excerpt.py): at 1,500
# characters, 330. The share that loses no evidence on any set at any budget (an evidence turn counting only if what
# is shown of it keeps the answer's words); shorter excerpts drop the words that answer.
MEMORY_SHARE = 0.22
MIN_MEMORY_CHARS = 80


def memory_chars(budget: int, share: float = MEMORY_SHARE) -> int:
    """What one memory may take of `budget` (`share` of it; another share: a design the benchmarks weigh)."""
    return max(MIN_MEMORY_CHARS, round(budget * share))


@dataclass(frozen=True)  # what is shown of it is worked out once (`cached_property`); a changed hit is a new one
class Candidate:
    kind: Kind
    id: uuid.UUID
    content: str
    occurred_at: datetime
    similarity: float
    margin: float
    coverage: float
    score: float
    speaker: str | None = None  # a message's role; archival passages have none
    written: float = 0.0  # where it stands among its memory's rows as they were written (a message's seq)
    answers: uuid.UUID | None = None  # a short reply's: the short question it answers (app/memory/search/hybrid.py)
    cap: int = memory_chars(BUDGET_CHARS)  # of its content, as shown
    min_margin: float = MIN_MARGIN  # what its query asks of the margin
    terms: frozenset[str] = frozenset()  # the query's lexical terms, around which a long memory is cut
    in_window: bool = False  # said within the time a question about the asker's own past names ("last week")
    sources: tuple[uuid.UUID, ...] = ()  # a fact's: the messages and passages it was distilled from

    @property
    def evident(self) -> bool:
        """Relevant on its own: close in meaning, sharing enough of the query's words, or from the time asked about."""
        return self.margin >= self.min_margin or self.coverage >= MIN_COVERAGE or self.in_window

    @cached_property
    def heading(self) -> str:
        """The day, after its kind's label if the kind has one (for an earlier message, "conversation")."""
        day = self.occurred_at.date().isoformat()  # as %Y-%m-%d, without strftime's cost
        label = BY_NAME[self.kind].heading
        return f"[{label}, {day}]" if label else f"[{day}]"

    @cached_property
    def shown(self) -> str:
        """Its content as the section shows it (one line, within `cap`: an excerpt about `terms`), before escaping."""
        return excerpt(marked(self.content), self.terms, self.cap)

    @cached_property
    def item(self) -> str:
        said = f"{self.speaker}: " if self.speaker else ""
        return f"- {said}{one_line(self.shown)}"
