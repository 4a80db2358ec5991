"""The gate and the budget of recollection (app/memory/recollection/recollector.py reads the hits): which hits go in, in
what order, and how they are written.

A relevance gate first asks whether memory holds anything about the message at all: some hit must be close in
meaning or share enough of the query's words. Close: its cosine similarity stands out from the query's baseline
(the margin over the query's similarity to generic text, on e5's scale, see app/memory/search/baseline.py; a raw
cosine cannot tell, since multilingual-e5 scores unrelated texts 0.75-0.85). Words: lexical coverage, the share of
the query's distinct tokens found in the hit (bigrams for Japanese). When nothing is evident, nothing goes in:
irrelevant memories mislead a model. A question about the asker's own life (`Baseline.personal`) needs less margin:
memory is where its answer would be. A query compared with fewer memories than the hits searched needs less too
(`min_margin`): the best of five unrelated memories stands out by chance less often than the best of thirty, so a
store of five answers "What do I do for a living?" from its first week. A question about the asker's own past that
names a time ("What did I do last week?") is answered by what was said then, in whatever words (`in_window`). A
message that only acknowledges ("Yes", "はい") asks nothing (`acknowledges`).

When some hit is evident, the budget is filled best first (`select`): every evident hit, and the others within
COMPANY_RATIO of the best hit of their memory (in a conversation the answer is often a short turn that shares
neither words nor much meaning with the question, and the fused ranking, not the gate, is what finds it); a hit too
long for what is left gives way to shorter ones after it, a short reply brings the question it answers when both fit
("Yes, last summer" means nothing alone), and a text already chosen is not repeated (a handed-in turn stored twice,
the message being answered). They are written under a heading per day (and memory, for earlier messages), in the
order they were said, one line each, as data (app/memory/recollection/prompt_text.py). Thresholds come from bench/recollection.py,
chosen on LoCoMo, LongMemEval, the Japanese set and the first-week set together (bench/README.md)."""

import functools
import re
import unicodedata
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from statistics import NormalDist
from typing import Literal

from app.memory.recollection.excerpt import excerpt
from app.memory.recollection.prompt_text import marked, one_line
from app.memory.search import lexical

Kind = Literal["archival", "recall"]
KINDS: tuple[Kind, ...] = ("archival", "recall")

MIN_MARGIN = 0.08
# A question about the asker's own life (its Baseline.personal at least PERSONAL) needs less margin: memory is
# where its answer would be, and e5 gives a paraphrase across languages little margin ("せがれが放課後に打ちこむ
# スポーツは？", 0.070). 0.055 let in 3 of 20 off-topic messages (tests/data/off_topic_heldout.json), 0.065 one.
PERSONAL = 0.02
PERSONAL_MIN_MARGIN = 0.065
# The bars hold for a query compared with REFERENCE_COMPARED memories or more (the hits searched: every store of the
# benchmark sets); a smaller store's are lower (`min_margin`). MARGIN_SPREAD: the standard deviation of unrelated
# (message, memory) pairs' margins, FALSE_OPEN the chance the bar leaves to the best of them.
REFERENCE_COMPARED = 30
MARGIN_SPREAD = 0.028  # of the first-week set's (question, memory that does not answer it) pairs: 0.028 personal or not
FALSE_OPEN = 0.05
MIN_COVERAGE = 0.7
# A question about a time is handed what was said then and ranks among the best of it: within this share of its
# best fused score (bench/README.md, first-week set).
WINDOW_RATIO = 0.3
# Whole phrases, matched whole: "you" or "do" alone acknowledges nothing ("Will you do it?" asks)
_ACKNOWLEDGEMENTS = (
    "yes", "yeah", "yep", "yup", "no", "nope", "nah", "ok", "okay", "k", "sure", "thanks", "thank you", "thx", "ty",
    "great", "cool", "nice", "good", "fine", "perfect", "awesome", "alright", "all right", "right", "exactly",
    "indeed", "noted", "lol", "haha", "hmm", "hm", "oh", "ah", "wow", "bye", "hi", "hello", "hey", "so much",
    "a lot", "very much", "well done", "sounds good", "got it", "will do", "of course", "no problem", "good night",
    "good morning", "see you",
    "はい", "いいえ", "うん", "ううん", "ええ", "いや", "ありがとう", "ありがとうございます", "どうも", "了解", "了解です",
    "りょうかい", "わかった", "わかりました", "分かった", "分かりました", "なるほど", "そうですね", "そうだね", "そっか",
    "そうか", "おk", "おっけー", "オッケー", "いいね", "すごい", "笑", "おやすみ", "おやすみなさい", "こんにちは", "おはよう",
    "おはようございます", "こんばんは", "よろしく", "よろしくお願いします", "お疲れ様", "お疲れ様です",
)  # fmt: skip
_PHRASE = "|".join(r"\s+".join(map(re.escape, p.split())) for p in sorted(_ACKNOWLEDGEMENTS, key=len, reverse=True))
_ACKNOWLEDGEMENT = re.compile(rf"(?:(?:{_PHRASE})(?:\s+|$))*")
_NOT_WORDS = re.compile(r"[^\w]+|_")
MIN_QUERY_TOKENS_FOR_COVERAGE = 2
# Evident hits come along as far as the budget goes (a share of the best evident hit's fused score, 0.665 until
# 2026-12-06, dropped answers that score well below an echo of the question); the others within COMPANY_RATIO of
# the best hit of their memory. Chosen with bench/recollection.py (bench/README.md).
EVIDENT_RATIO = 0.0
COMPANY_RATIO = 0.5
BUDGET_CHARS = 1500  # of all of them, by default (the chat path's, ENGRAM_RECOLLECTION_CHARS)
# One memory is shown in at most this share of the budget, a longer one as an excerpt (app/memory/recollection/excerpt.py): at
# 1,500 characters, 330 (a fixed 600 before). Chosen with bench/recollection.py on the three sets at once, an evidence
# turn counting only if what is shown of it keeps the answer's words: of the shares 0.11 to 0.40, 0.22 is the one that
# loses nothing on any set at any budget (bench/README.md); shorter excerpts drop the words that answer.
MEMORY_SHARE = 0.22
MIN_MEMORY_CHARS = 80
MAX_BUDGET_CHARS = 20_000  # what one request may ask for
MIN_SEARCHED, MAX_SEARCHED = 30, 100  # hits searched per memory: enough to fill the budget with short ones
CHARS_PER_SEARCHED = 50
# A reply this short comes with the question it answers ("Yes, last summer" means nothing alone); a longer one says
# what it is about. Chosen with bench/recollection.py (bench/README.md): the longest that hands over no less
# evidence on any set at any budget (80 loses 0.001 of LoCoMo at 3,000, 200 up to 0.006).
QUESTIONED_CHARS = 60
SHORT_QUERY_TERMS = 4  # a message with fewer terms is searched with the one before it


def min_margin(compared: int, personal: float) -> float:
    """The margin a hit needs to be evident when the query is compared with `compared` memories: the chance that one
    of them stands out by accident grows with their number. Unrelated pairs' margins spread about the baseline with
    a deviation of about MARGIN_SPREAD; the bar is the margin the best of `compared` unrelated memories would pass
    with the same probability as the best of REFERENCE_COMPARED does at the bar chosen on the benchmark sets (its
    expected maximum: the normal quantile of (1 - FALSE_OPEN) ** (1 / n)). From REFERENCE_COMPARED on, the bars are
    MIN_MARGIN and PERSONAL_MIN_MARGIN; below, lower: in a store of five memories the answer to "What do I do for a
    living?" stands 0.06 above the baseline, and no more than 1 in 15 off-topic messages reaches that (bench/README.md,
    first-week set)."""
    bar = PERSONAL_MIN_MARGIN if personal >= PERSONAL else MIN_MARGIN
    n = max(1, min(compared, REFERENCE_COMPARED))
    return bar - MARGIN_SPREAD * (_expected_best(REFERENCE_COMPARED) - _expected_best(n))


@functools.cache
def _expected_best(n: int) -> float:
    return NormalDist().inv_cdf((1 - FALSE_OPEN) ** (1 / n))


def acknowledges(query: str) -> bool:
    """Whether the message only acknowledges or greets ("Yes", "ok thanks!", "はい、ありがとう"), or holds no word."""
    text = unicodedata.normalize("NFKC", query).casefold()
    return _ACKNOWLEDGEMENT.fullmatch(_NOT_WORDS.sub(" ", text).strip()) is not None


def memory_chars(budget: int, share: float = MEMORY_SHARE) -> int:
    """What one memory may take of `budget` (`share` of it; another share: a design bench/recollection.py weighs)."""
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
        """The day, and for an earlier message its memory: archival memory is most of what is recollected, and its
        name on every day's heading cost a LoCoMo prompt ~60 characters of 1,500 (bench/ARCHIVE.md)."""
        day = self.occurred_at.date().isoformat()  # as %Y-%m-%d, without strftime's cost
        return f"[{day}]" if self.kind == "archival" else f"[conversation, {day}]"

    @cached_property
    def shown(self) -> str:
        """Its content as the section shows it (one line, within `cap`: an excerpt about `terms`), before escaping."""
        return excerpt(marked(self.content), self.terms, self.cap)

    @cached_property
    def item(self) -> str:
        said = f"{self.speaker}: " if self.speaker else ""
        return f"- {said}{one_line(self.shown)}"


def coverage(query_tokens: frozenset[str], search_text: str) -> float:
    if len(query_tokens) < MIN_QUERY_TOKENS_FOR_COVERAGE:
        return 0.0
    return len(query_tokens & set(search_text.split())) / len(query_tokens)


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
    less evidence at every budget: bench/README.md, "Facts with their sources")."""
    per_memory = per_memory or memory_chars(budget)
    if not any(h.evident for h in hits):
        return []
    best = _best_scores(hits)
    # Evident hits are measured against the best evident one: a hit that outscores it without being evident (a
    # date or speaker bonus, a strong BM25 share) must not push out what opened the gate.
    best_evident = _best_scores([h for h in hits if h.evident])

    def comes_along(h: Candidate) -> bool:
        if h.evident:
            return h.score >= evident_ratio * best_evident[h.kind]
        return h.score >= company * best[h.kind]

    seen = {_said(text) for text in repeats}
    chosen: list[Candidate] = []
    headings: set[str] = set()
    used = -1  # the lines' newlines: one fewer than the lines

    def cost(*lines: Candidate) -> int:
        """What `lines` add to the section, a heading for each day not shown yet."""
        days = {line.heading for line in lines} - headings
        return sum(len(day) + 1 for day in days) + sum(len(line.item) + 1 for line in lines)

    by_id = {h.id: h for h in hits}
    ranked = sorted(filter(comes_along, hits), key=lambda h: -h.score)
    kin = _kin(hits) if facts else {}
    for hit in _facts_first(ranked, hits) if facts else ranked:
        if _said(hit.content) in seen or any(c.id in kin.get(hit.id, ()) for c in chosen):
            continue  # a text already chosen; a line whose fact is (or a fact whose line is: its fact was too long)
        hit = _within(hit, per_memory)
        shown: Candidate | None = hit
        if not chosen and used + cost(hit) > budget:
            shown = _cut_to(hit, budget - cost(hit) + len(hit.item))
        if shown is None or used + cost(shown) > budget:
            continue
        # "Yes, last summer" means nothing alone: a reply comes with the question it answers when both fit (after
        # it here, so that the reply's day places the heading; `arrange` puts the question first within a day)
        question = by_id.get(shown.answers) if shown.answers and len(shown.content) <= questioned else None
        if question is not None and _said(question.content) not in seen:
            question = _within(question, per_memory)
            lines = [shown, question] if used + cost(shown, question) <= budget else [shown]
        else:
            lines = [shown]
        used += cost(*lines)
        for line in lines:
            chosen.append(line)
            seen.add(_said(line.content))
            headings.add(line.heading)
    return chosen


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


def arrange(chosen: list[Candidate]) -> list[Candidate]:
    """In the order `render` writes them: under the heading of their day, the day of its best hit placing a heading
    (a conversation's hits often come from a few sessions; a heading per line cost them 25 characters each,
    bench/ARCHIVE.md "Memory in the prompt"), and within a day in the order they were said, so that a day's lines
    read as its conversation did (a reply after its question)."""
    days: dict[str, list[Candidate]] = {}
    for r in chosen:
        days.setdefault(r.heading, []).append(r)
    return [r for rs in days.values() for r in sorted(rs, key=lambda r: (r.occurred_at, r.written))]


def render(chosen: list[Candidate]) -> str | None:
    """The section's lines ("[2023-05-08]" for archival memory, "[conversation, 2023-05-08]" for earlier messages,
    then a line per memory); None for no memories."""
    lines: list[str] = []
    heading = None
    for r in arrange(chosen):
        if r.heading != heading:
            heading = r.heading
            lines.append(heading)
        lines.append(r.item)
    return "\n".join(lines) or None


def query_of(messages: Sequence[tuple[str, str]]) -> str:
    """The query for a recent conversation ([(role, content)], oldest first): its last user message (or its last
    message, if no user spoke), with the message before it when that one is short ("And when was that?" means
    nothing alone). Blank messages are passed over; "" if all are blank."""
    said = [(role, content.strip()) for role, content in messages if content.strip()]
    if not said:
        return ""
    last = max((i for i, (role, _) in enumerate(said) if role == "user"), default=len(said) - 1)
    query = said[last][1]
    if last > 0 and len(lexical.query_terms(query)) < SHORT_QUERY_TERMS:
        query = f"{said[last - 1][1]}\n{query}"
    return query
