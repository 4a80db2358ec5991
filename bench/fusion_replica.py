"""Rankings computed outside the service, over the vectors it stored and the passages it holds.

- The baselines of bench/retrieval.py: exact cosine, BM25 Okapi (`rank_bm25` over lower-cased `\\w+` words, as a
  newcomer would index) and reciprocal-rank fusion (k=60) of the two.
- A replica of Engram's hybrid statement (app/memory/search/hybrid.py) with every parameter open, so that a grid of designs
  can be scored on every set in seconds (bench/design_sweep.py); bench/retrieval.py checks that the replica at the
  shipped parameters ranks as the service does.
"""

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import Any

import numpy as np

from app.memory.search import bm25, hybrid, lexical, named_dates, named_speakers, named_sql

WORD = re.compile(r"\w+")
QUESTION = re.compile(hybrid.QUESTION_PATTERN)
RRF_K, RRF_CANDIDATES = 60, 100


@dataclass(frozen=True)
class Design:
    """The parameters of the hybrid ranking; the defaults are what app/memory/search/hybrid.py ships."""

    vector_weight: float = hybrid.VECTOR_WEIGHT["hybrid"]
    centre_share: float = hybrid.CENTRE_SHARE["hybrid"]  # of the vector candidates' mean, taken from the query
    candidates: int = hybrid.CANDIDATES_PER_LIST
    k1: float = bm25.BM25_K1
    b: float = bm25.BM25_B
    # The lexical score's scale: BM25 / max(best match in the pool, lexical_floor x the query's bound). 1.0: the
    # bound alone (a share of the query's lexical evidence), as the service; 0.0: the best match alone.
    lexical_floor: float = 1.0
    tokens: str = "engram"  # engram | no-stemming | no-stop-words: how passages and queries become terms
    # A reply to a question gets this share of the question's score (the question is among the top `reply_lead`).
    reply_share: float = hybrid.REPLY_SHARE
    reply_lead: int = hybrid.REPLY_LEAD
    reply_max_tokens: int = hybrid.REPLY_MAX_TOKENS  # a longer reply stands on its own
    date_share: float = named_sql.DATE_SHARE  # added, at the end, to a row from a date the query names
    speaker_share: float = named_sql.SPEAKER_SHARE  # added, at the end, to a row said by a speaker the query names

    def but(self, **changes: Any) -> "Design":
        return replace(self, **changes)


SHIPPED = Design()


def _variant_tokens(kind: str) -> Callable[[str], list[str]]:
    variants: dict[str, dict[str, Any]] = {
        "engram": {},
        "no-stemming": {"stem": False},
        "no-stop-words": {"stop_words": frozenset()},
    }
    return partial(lexical.tokens, **variants[kind])


class Terms:
    """A corpus' lexical statistics under one tokenisation: postings, lengths, document frequencies."""

    def __init__(self, passages: list[str], tokenize: Callable[[str], list[str]]):
        self.tokenize = tokenize
        tokens = [tokenize(p) for p in passages]
        self.n = len(passages)
        self.lengths = np.array([len(t) for t in tokens], dtype=np.float64)
        self.avgdl = max(float(self.lengths.mean()) if self.n else 1.0, 1.0)
        by_term: dict[str, list[tuple[int, int]]] = {}
        for i, toks in enumerate(tokens):
            for term, tf in Counter(toks).items():
                by_term.setdefault(term, []).append((i, tf))
        self.postings = {
            t: (np.array([d for d, _ in rows]), np.array([f for _, f in rows], dtype=np.float64)) for t, rows in by_term.items()
        }

    def idf(self, term: str) -> float:
        df = len(self.postings[term][0]) if term in self.postings else 0
        return float(np.log(1 + (self.n - df + 0.5) / (df + 0.5)))

    def query_terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(self.tokenize(query)))[: lexical.MAX_QUERY_TERMS]

    def bm25(self, terms: list[str], k1: float, b: float) -> np.ndarray:
        scores = np.zeros(self.n)
        for term in terms:
            if term in self.postings:
                docs, tf = self.postings[term]
                scores[docs] += self.idf(term) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * self.lengths[docs] / self.avgdl))
        return scores

    def bound(self, terms: list[str], k1: float) -> float:
        return sum(self.idf(t) for t in terms) * (k1 + 1)


class Indexed:
    """One corpus as the service holds it: its passages, stored vectors and dates (occurred_at, UTC), lexical
    statistics per tokenisation."""

    def __init__(self, passages: list[str], vectors: np.ndarray, dates: np.ndarray):
        self.passages, self.vectors, self.dates = passages, vectors, dates
        self.speakers = [p[:41].split(":", 1)[0].lower() for p in passages]  # named_speakers.SPEAKER_LABEL_SQL
        self._terms: dict[str, Terms] = {}

    def terms(self, kind: str = "engram") -> Terms:
        if kind not in self._terms:
            self._terms[kind] = Terms(self.passages, _variant_tokens(kind))
        return self._terms[kind]

    @cached_property
    def okapi(self) -> Any:  # a rank_bm25.BM25Okapi (the package ships no types)
        from rank_bm25 import BM25Okapi

        return BM25Okapi([WORD.findall(p.lower()) or [""] for p in self.passages])


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-scores, kind="stable")[:k]


def baselines(ix: Indexed, query: str, query_vector: np.ndarray, k: int) -> dict[str, list[int]]:
    dense = np.argsort(-(ix.vectors @ query_vector), kind="stable")
    okapi = np.argsort(-np.asarray(ix.okapi.get_scores(WORD.findall(query.lower()))), kind="stable")
    fused: dict[int, float] = {}
    for ranking in (dense, okapi):
        for rank, i in enumerate(ranking[:RRF_CANDIDATES], start=1):
            fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (RRF_K + rank)
    rrf = sorted(fused, key=lambda i: -fused[i])
    return {"cosine": [int(i) for i in dense[:k]], "bm25": [int(i) for i in okapi[:k]], "rrf k=60": rrf[:k]}


def engram(ix: Indexed, query: str, query_vector: np.ndarray, k: int, design: Design = SHIPPED) -> list[int]:
    """The ranking of app/memory/search/hybrid.py's statement (the exact-scan branch: agents here are small) under `design`."""
    terms = ix.terms(design.tokens)
    query_terms = terms.query_terms(query)
    cosine = ix.vectors @ query_vector
    bm25 = terms.bm25(query_terms, design.k1, design.b)
    lexical_ids = [i for i in _top(bm25, design.candidates) if bm25[i] > 0]
    nearest = _top(cosine, design.candidates)
    centred = ix.vectors @ (query_vector - design.centre_share * ix.vectors[nearest].mean(axis=0))
    pool = np.array(sorted(set(nearest.tolist()) | set(lexical_ids)))
    low, high = centred[pool].min(), centred[pool].max()
    sim_n = (centred[pool] - low) / (high - low) if high > low else np.ones(len(pool))
    scale = max(bm25[pool].max(), design.lexical_floor * terms.bound(query_terms, design.k1))
    lex_n = bm25[pool] / scale if scale > 0 else np.zeros(len(pool))
    fused = design.vector_weight * sim_n + (1 - design.vector_weight) * lex_n
    if design.reply_share:
        pool, fused = _with_replies(ix, pool, fused, centred, bm25 / scale if scale > 0 else bm25 * 0, design)
    fused = fused + design.date_share * _named(ix, query, pool) + design.speaker_share * _spoken(ix, query, pool)
    # ties: the higher cosine first, as the statement orders them
    order = np.lexsort((-cosine[pool], -fused))
    return [int(pool[i]) for i in order[:k]]


def _named(ix: Indexed, query: str, rows: np.ndarray) -> np.ndarray:
    """1 for each of `rows` that occurred within the span of a date the query names, else 0."""
    hit = np.zeros(len(rows))
    for start, stop in named_dates.spans(query):
        when = ix.dates[rows]
        hit[(when >= np.datetime64(start.replace(tzinfo=None))) & (when < np.datetime64(stop.replace(tzinfo=None)))] = 1
    return hit


def _spoken(ix: Indexed, query: str, rows: np.ndarray) -> np.ndarray:
    """1 for each of `rows` said by a speaker the query names (its label, as SPEAKER_LABEL_SQL reads it), else 0."""
    named = set(named_speakers.speakers(query))
    return np.array([1.0 if ix.speakers[i] in named else 0.0 for i in rows])


def _with_replies(
    ix: Indexed, pool: np.ndarray, fused: np.ndarray, centred: np.ndarray, lex_n: np.ndarray, design: Design
) -> tuple[np.ndarray, np.ndarray]:
    """The short passage after each of the top `reply_lead` passages that is a short question gains `reply_share` of
    its score (at most 1 in all); one outside the candidates joins them, its own score computed as theirs were.
    `centred`: every passage's centred cosine. Returns the rows and their scores."""
    lo, hi = centred[pool].min(), centred[pool].max()
    own = dict(zip(pool.tolist(), fused.tolist(), strict=True))
    boosted = dict(own)
    lengths = ix.terms(design.tokens).lengths
    for j in np.argsort(-fused, kind="stable")[: design.reply_lead]:
        question = int(pool[j])
        reply = question + 1
        short = reply < len(ix.passages) and max(lengths[question], lengths[reply]) <= design.reply_max_tokens
        if short and QUESTION.search(ix.passages[question]):
            if reply not in own:
                sim_n = min(max((centred[reply] - lo) / (hi - lo), 0.0), 1.0) if hi > lo else 1.0
                own[reply] = design.vector_weight * sim_n + (1 - design.vector_weight) * lex_n[reply]
            boosted[reply] = min(own[reply] + design.reply_share * own[question], 1.0)
    ids = np.array(sorted(boosted))
    return ids, np.array([boosted[i] for i in ids])
