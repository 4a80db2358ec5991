"""The budget of recollection: which hits go in, and in what order. When some hit is evident, the budget is filled
best first (`select`): every evident hit, and the others within COMPANY_RATIO of the best hit of their memory (in a
conversation the answer is often a short turn that shares neither words nor much meaning with the question, and the
fused ranking, not the gate, is what finds it); a hit too long for what is left gives way to shorter ones after it, a
short reply brings the question it answers when both fit ("Yes, last summer" means nothing alone), and a text already
chosen is not repeated (a handed-in turn stored twice, the message being answered)."""

import uuid
from collections.abc import Iterable
from dataclasses import replace

from app.memory.recollection.candidate import BUDGET_CHARS, Candidate, memory_chars

# Evident hits come along as far as the budget goes (a share of the best evident hit's fused score dropped answers
# that score well below an echo of the question); the others within COMPANY_RATIO of the best hit of their memory.
EVIDENT_RATIO = 0.0
COMPANY_RATIO = 0.5
MAX_BUDGET_CHARS = 20_000  # what one request may ask for
MIN_SEARCHED, MAX_SEARCHED = 30, 100  # hits searched per memory: enough to fill the budget with short ones
CHARS_PER_SEARCHED = 50
# A reply this short comes with the question it answers ("Yes, last summer" means nothing alone); a longer one says
# what it is about: the longest that hands over no less evidence on any set at any budget.
QUESTIONED_CHARS = 60


def searched_for(budget: int) -> int:
    """Hits searched per memory for a budget: `select` may pass over long ones for shorter ones after them."""
    return max(MIN_SEARCHED, min(MAX_SEARCHED, budget // CHARS_PER_SEARCHED))


def select(
    hits: list[Candidate],
    *,
    budget: int = BUDGET_CHARS,
    company: float = COMPANY_RATIO,
    evident_ratio: float = EVIDENT_RATIO,
    repeats: Iterable[str] = (),
    per_memory: int | None = None,
    questioned: int = QUESTIONED_CHARS,
    facts: bool = True,
) -> list[Candidate]:
    """The hits that go into the prompt, best first (a reply's question after it): none unless one is evident; then
    the evident ones within `evident_ratio` of the best evident score of their memory and the others within `company`
    of its best score, within `budget` characters as `render` writes them, each within `per_memory`
    (`memory_chars(budget)` unless given). A hit too long for what is left of the budget leaves its place to the next
    that fits (the first is cut to fit); a reply of at most `questioned` characters comes with the question it
    answers (`Candidate.answers`, one of `hits`) when both fit; a text already chosen, or one of `repeats` (the
    message being answered), is not repeated. With `facts`, a fact goes where it or one of its sources (the lines
    it was drawn from, among `hits`) would, and they stay out: one of them carries what both tell, and the fact in
    fewer characters (a source line let in after its fact where it holds terms of the query the fact lacks handed over
    less evidence at every budget)."""
    per_memory = per_memory or memory_chars(budget)
    if not any(h.evident for h in hits):
        return []
    ranked = _coming_along(hits, company, evident_ratio)
    section = _Section(budget, repeats)
    by_id = {h.id: h for h in hits}
    kin = _kin(hits) if facts else {}
    for hit in _facts_first(ranked, hits) if facts else ranked:
        if section.holds(hit.content) or any(c.id in kin.get(hit.id, ()) for c in section.chosen):
            continue  # a text already chosen; a line whose fact is (or a fact whose line is: its fact was too long)
        shown = section.fitted(_within(hit, per_memory))
        if shown is None:
            continue
        # "Yes, last summer" means nothing alone: a reply comes with the question it answers when both fit (after
        # it here, so that the reply's day places the heading; `arrange` puts the question first within a day)
        question = by_id.get(shown.answers) if shown.answers and len(shown.content) <= questioned else None
        if question is not None and not section.holds(question.content):
            question = _within(question, per_memory)
            section.add(*([shown, question] if section.fits(shown, question) else [shown]))
        else:
            section.add(shown)
    return section.chosen


def _coming_along(hits: list[Candidate], company: float, evident_ratio: float) -> list[Candidate]:
    """The hits that may go in, best first: the evident ones within `evident_ratio` of the best evident score of
    their memory, the others within `company` of its best score. Evident hits are measured against the best evident
    one: a hit that outscores it without being evident (a date or speaker bonus, a strong BM25 share) must not push
    out what opened the gate."""
    best = _best_scores(hits)
    best_evident = _best_scores([h for h in hits if h.evident])

    def comes_along(h: Candidate) -> bool:
        if h.evident:
            return h.score >= evident_ratio * best_evident[h.kind]
        return h.score >= company * best[h.kind]

    return sorted(filter(comes_along, hits), key=lambda h: -h.score)


class _Section:
    """The lines chosen so far, as `render` will write them: their texts (and the caller's `repeats`), the days
    whose headings they bring, and the characters they take of `budget`."""

    def __init__(self, budget: int, repeats: Iterable[str]):
        self.budget = budget
        self.chosen: list[Candidate] = []
        self.seen = {_said(text) for text in repeats}
        self.headings: set[str] = set()
        self.used = -1  # the lines' newlines: one fewer than the lines

    def holds(self, text: str) -> bool:
        return _said(text) in self.seen

    def cost(self, *lines: Candidate) -> int:
        """What `lines` add to the section, a heading for each day not shown yet."""
        days = {line.heading for line in lines} - self.headings
        return sum(len(day) + 1 for day in days) + sum(len(line.item) + 1 for line in lines)

    def fits(self, *lines: Candidate) -> bool:
        return self.used + self.cost(*lines) <= self.budget

    def fitted(self, hit: Candidate) -> Candidate | None:
        """`hit` if it fits what is left of the budget, None if not; the first line is cut to fit."""
        shown: Candidate | None = hit
        if not self.chosen and not self.fits(hit):
            shown = _cut_to(hit, self.budget - self.cost(hit) + len(hit.item))
        return shown if shown is not None and self.fits(shown) else None

    def add(self, *lines: Candidate) -> None:
        self.used += self.cost(*lines)
        for line in lines:
            self.chosen.append(line)
            self.seen.add(_said(line.content))
            self.headings.add(line.heading)


def _kin(hits: list[Candidate]) -> dict[uuid.UUID, set[uuid.UUID]]:
    """Each hit's facts and sources among `hits`: the lines that tell what it tells, in other words."""
    kin: dict[uuid.UUID, set[uuid.UUID]] = {}
    ids = {h.id for h in hits}
    for fact in hits:
        for source in ids.intersection(fact.sources):
            kin.setdefault(fact.id, set()).add(source)
            kin.setdefault(source, set()).add(fact.id)
    return kin


def _facts_first(ranked: list[Candidate], hits: list[Candidate]) -> list[Candidate]:
    """`ranked` with each hit's best fact (among `hits`, come along or not) just before it: a fact says in 90
    characters what its source lines say in 300, so where a line would go, its fact goes first. Only the best: a line
    that several facts were drawn from does not bring them all (the others go on their own scores)."""
    best_fact: dict[uuid.UUID, Candidate] = {}
    for fact in sorted(hits, key=lambda h: -h.score):
        for source in fact.sources:
            best_fact.setdefault(source, fact)
    order: dict[uuid.UUID, Candidate] = {}
    for hit in ranked:
        if (best := best_fact.get(hit.id)) is not None:
            order.setdefault(best.id, best)
        order.setdefault(hit.id, hit)
    return list(order.values())


def _within(hit: Candidate, per_memory: int) -> Candidate:
    """The hit shown within `per_memory` characters."""
    if hit.cap != per_memory and len(hit.content) > min(hit.cap, per_memory):  # else shown alike
        return replace(hit, cap=per_memory)
    return hit


def _said(text: str) -> str:
    return " ".join(text.split()).casefold()


def _cut_to(hit: Candidate, chars: int) -> Candidate | None:
    """The hit cut so that its line takes at most `chars` characters (escaping may lengthen it); None if no useful
    part of it fits."""
    cut = replace(hit, cap=min(hit.cap, chars))
    while cut.cap > 0 and len(cut.item) > chars:
        cut = replace(cut, cap=cut.cap - max(1, len(cut.item) - chars))
    return cut if cut.cap >= min(40, len(hit.shown)) else None


def _best_scores(hits: list[Candidate]) -> dict[str, float]:
    """The best score of each memory (kind) among `hits`."""
    best: dict[str, float] = {}
    for h in hits:
        best[h.kind] = max(h.score, best.get(h.kind, h.score))
    return best
