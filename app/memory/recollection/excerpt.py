"""The part of a long memory that a query is about: a handed-in conversation's turns run to a thousand characters
(an assistant's answer, a user's story), and shown whole, two or three of them fill a prompt's budget for memories.
A memory longer than its share of the budget is shown as an excerpt instead: the run of sentences around the one
that shares the most of the query's terms, as long as the share allows, its cuts marked "…", a leading label such as
a speaker's name ("Caroline: ") kept. The terms are the lexical search's (app/memory/search/lexical.py), so a
Japanese query matches by character bigrams. A memory that shares no term with the query (found by meaning alone)
is shown from its start."""

import re

from app.memory.search import lexical

CUT_MARK = "…"
# A memory only a little longer than its cap is not worth cutting to its sentences: it would lose one to save a few
# characters. An excerpt takes at most this share of the cap, so a memory up to 1/0.9 of the excerpt stays whole.
EXCERPT_SHARE = 0.9
# A sentence ends at . ! ? followed by a space, at a Japanese or Chinese full stop, or at a marked line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\s*¶\s*")
# "Caroline: ", "Dr. Kim: ": a name of one or two words before the text (archival passages written as a speaker's
# line); a label the excerpt would otherwise cut off.
_LABEL = re.compile(r"^[^\s:]{1,20}(?: [^\s:]{1,20})?: ")


def excerpt(text: str, terms: frozenset[str], chars: int) -> str:
    """`text` (one line) within `chars` characters: whole if it fits, else its sentences around the one sharing the
    most `terms`, in at most EXCERPT_SHARE of `chars` (cut from its start if it shares none)."""
    if len(text) <= chars:
        return text
    label = match.group(0) if (match := _LABEL.match(text)) else ""
    body, room = text[len(label) :], int(chars * EXCERPT_SHARE) - len(label)
    spans = _sentences(body)
    shared = [len(terms.intersection(lexical.tokens(body[start:end]))) for start, end in spans]
    if room <= 0 or not any(shared):
        return text[:chars]
    best = max(range(len(spans)), key=lambda i: (shared[i], -i))
    first = last = best
    while True:  # grow towards the neighbour sharing more terms (the later one on a tie) while the run fits
        options = []
        if last + 1 < len(spans):
            options.append((shared[last + 1], first, last + 1))
        if first > 0:
            options.append((shared[first - 1], first - 1, last))
        options.sort(key=lambda option: -option[0])
        fitting = [(a, b) for _, a, b in options if len(_marked(body, spans, a, b)) <= room]
        if not fitting:
            break
        first, last = fitting[0]
    shown = _marked(body, spans, first, last)
    if len(shown) > room:  # one sentence longer than the room
        shown = f"{shown[: room - len(CUT_MARK) - 1].rstrip()} {CUT_MARK}"
    return label + shown


def _sentences(body: str) -> list[tuple[int, int]]:
    """The (start, end) of each sentence of `body`, its closing punctuation included."""
    spans, start = [], 0
    for stop in _SENTENCE_END.finditer(body):
        if stop.start() > start:
            spans.append((start, stop.start()))
        start = stop.end()
    if start < len(body):
        spans.append((start, len(body)))
    return spans or [(0, len(body))]


def _marked(body: str, spans: list[tuple[int, int]], first: int, last: int) -> str:
    before = f"{CUT_MARK} " if first > 0 else ""
    after = f" {CUT_MARK}" if last < len(spans) - 1 else ""
    return before + body[spans[first][0] : spans[last][1]] + after
