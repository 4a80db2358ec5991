"""How the hybrid design was chosen, and how much each of its parameters matters, on every set at once.

Every design of a grid (vector weight x centre share x reply share) is scored by the replica of the hybrid statement
(bench/fusion_replica.py) on the vectors the service stored. The protocol cannot favour one set, nor one lucky
corner of the grid: a design must keep the Japanese set's top-3 at 1.00 for Japanese and English-to-Japanese
questions, and so must every design one step away from it on the grid; among those, the winner is the one whose
*worst* lead over the best same-run baseline, on LongMemEval and on LoCoMo, is largest, counting for each design
the worst of itself and its neighbours. A lead is the mean over recall @1/@3/@5/@10 (at @5 alone, one evidence turn
of LongMemEval's 42 is 0.008 and decided between designs 0.03 apart on LoCoMo's 760 questions). Worst cases within
RESOLUTION of the best are ties, which the mean lead over the sets decides.
Printed: the best designs under that protocol, what choosing on one set alone would have given on the other
(leave-one-set-out), and a sensitivity table: each lever moved alone from the shipped design.
"""

import argparse
import itertools
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.fusion_replica import SHIPPED, Design, baselines, engram
from bench.retrieval_sets import KS, Question

if TYPE_CHECKING:  # bench.retrieval imports this module
    from bench.retrieval import Stored

Query = tuple["Stored", Question, np.ndarray]  # one question as bench.retrieval ran it: its corpus, itself, its vector

AT5 = KS.index(5)
RESOLUTION = 0.006  # of a worst-case lead: one evidence turn of LongMemEval dev's 42 at one of the four ranks
JAPANESE_KINDS = ("ja", "en-ja")  # top-3 must stay 1.00 for these
GRID = {
    "vector_weight": (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6),
    "centre_share": (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
    "reply_share": (0.0, 0.2, 0.3, 0.4),
}
SENSITIVITY = {
    "vector_weight": (0.3, 0.4, 0.45, 0.5, 0.6, 0.7),
    "centre_share": (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0),
    "lexical_floor": (0.0, 0.25, 0.5, 0.75, 1.0),
    "reply_share": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
    "reply_lead": (5, 10, 30, 100),
    "reply_max_tokens": (20, 30, 50, 80, 10_000),
    "candidates": (30, 50, 100, 200),
    "k1": (0.9, 1.2, 1.6),
    "b": (0.5, 0.75, 0.9),
    "tokens": ("engram", "no-stemming", "no-stop-words"),
    "date_share": (0.0, 0.1, 0.2, 0.3),
    "speaker_share": (0.0, 0.02, 0.05, 0.1, 0.15, 0.2),
}


class Scorer:
    """Recall of a design on each set, and the best baseline's, from the queries bench/retrieval.py ran."""

    def __init__(self, queries_by_set: dict[str, list[Query]]):
        self.sets = {name: [(s, q, v) for s, q, v in queries if q.evidence] for name, queries in queries_by_set.items()}
        self.japanese = next((n for n in self.sets if n.startswith("Japanese")), None)
        self.ranked = [n for n in self.sets if n != self.japanese]  # the sets a design is chosen on
        self.best_baseline: dict[str, np.ndarray] = {}
        for name, queries in self.sets.items():
            rows: dict[str, list[list[float]]] = {b: [] for b in ("cosine", "bm25", "rrf k=60")}
            for s, q, v in queries:
                for b, ranking in baselines(s.index, q.text, v, max(KS)).items():
                    rows[b].append(s.recall(q, ranking))
            self.best_baseline[name] = np.max([np.mean(r, axis=0) for r in rows.values()], axis=0)
        self._memo: dict[tuple[str, Design], tuple[np.ndarray, dict[str, float]]] = {}

    def score(self, name: str, design: Design) -> tuple[np.ndarray, dict[str, float]]:
        """Mean recall@KS, and top-3 per category."""
        if (name, design) not in self._memo:
            rows: list[list[float]] = []
            by_category: dict[str, list[float]] = {}
            for s, q, v in self.sets[name]:
                r = s.recall(q, engram(s.index, q.text, v, max(KS), design))
                rows.append(r)
                by_category.setdefault(q.category, []).append(r[KS.index(3)])
            self._memo[(name, design)] = (np.mean(rows, axis=0), {c: float(np.mean(v)) for c, v in by_category.items()})
        return self._memo[(name, design)]

    def admissible(self, design: Design) -> bool:
        if self.japanese is None:
            return True
        top3 = self.score(self.japanese, design)[1]
        return all(top3.get(kind, 1.0) >= 1.0 for kind in JAPANESE_KINDS)

    def lead(self, name: str, design: Design) -> float:
        """The mean lead over the best baseline across recall @1/@3/@5/@10."""
        return float(np.mean(self.score(name, design)[0] - self.best_baseline[name]))

    def lead_at5(self, name: str, design: Design) -> float:
        return float(self.score(name, design)[0][AT5] - self.best_baseline[name][AT5])

    def worst_lead(self, design: Design, sets: Iterable[str] | None = None) -> float:
        return min(self.lead(n, design) for n in (sets or self.ranked))

    def mean_lead(self, design: Design) -> float:
        return float(np.mean([self.lead(n, design) for n in self.ranked]))

    def robust(self, design: Design) -> tuple[bool, float]:
        """Admissible with all its grid neighbours, and the worst lead over itself and them."""
        near = [design, *neighbours(design)]
        return all(self.admissible(d) for d in near), min(self.worst_lead(d) for d in near)


def grid() -> list[Design]:
    return [SHIPPED.but(**dict(zip(GRID, values, strict=True))) for values in itertools.product(*GRID.values())]


def neighbours(design: Design) -> list[Design]:
    """The designs of the grid one step away in one lever."""
    out = []
    for lever, values in GRID.items():
        at = values.index(getattr(design, lever)) if getattr(design, lever) in values else None
        if at is not None:
            out += [design.but(**{lever: values[i]}) for i in (at - 1, at + 1) if 0 <= i < len(values)]
    return out


def _describe(design: Design) -> str:
    return ", ".join(f"{k}={getattr(design, k)}" for k in GRID)


def _cells(scorer: Scorer, design: Design) -> str:
    cells = []
    for name in scorer.ranked:
        r = scorer.score(name, design)[0]
        cells.append(
            f"{r[0]:.3f}/{r[AT5]:.3f}/{r[-1]:.3f} ({scorer.lead(name, design):+.3f}, @5 {scorer.lead_at5(name, design):+.3f})"
        )
    if scorer.japanese:
        top3 = scorer.score(scorer.japanese, design)[1]
        cells.append("/".join(f"{top3.get(k, float('nan')):.2f}" for k in JAPANESE_KINDS))
    return " | ".join(f"{c:<30}" for c in cells)


def report(queries_by_set: dict[str, list[Query]]) -> dict[str, Any]:
    scorer = Scorer(queries_by_set)
    header = " | ".join(f"{n + ' @1/@5/@10 (mean lead, @5 lead)':<42}" for n in scorer.ranked)
    header += " | Japanese top-3 " + "/".join(JAPANESE_KINDS) if scorer.japanese else ""
    robust = {d: scorer.robust(d) for d in grid()}
    designs = [d for d in grid() if robust[d][0]]
    top = max(robust[d][1] for d in designs)
    ranked = sorted(designs, key=lambda d: (robust[d][1] < top - RESOLUTION, -scorer.mean_lead(d), -robust[d][1]))
    print(
        f"\n== Design choice: {len(designs)} of {len(grid())} grid designs keep the Japanese top-3 at 1.00 with their"
        " neighbours; best worst-case mean lead over themselves and their neighbours (ties within"
        f" {RESOLUTION}: the best mean lead over the sets)"
    )
    print(f"{'design':<52} | {'robust':>7} | {header}")
    for d in ranked[:8]:
        print(f"{_describe(d):<52} | {robust[d][1]:+.3f} | {_cells(scorer, d)}")
    print(
        f"{'shipped: ' + _describe(SHIPPED):<52} | {robust.get(SHIPPED, (0, float('nan')))[1]:+.3f} | {_cells(scorer, SHIPPED)}"
    )
    print("\nLeave one set out (chosen on one set's mean lead alone, then scored on the other): ")
    for chosen_on in scorer.ranked:
        best = max(designs, key=lambda d: scorer.lead(chosen_on, d))
        others = ", ".join(f"{n} lead {scorer.lead(n, best):+.3f}" for n in scorer.ranked if n != chosen_on)
        print(f"  chosen on {chosen_on}: {_describe(best)} -> {chosen_on} lead {scorer.lead(chosen_on, best):+.3f}; {others}")
    print("\n== Sensitivity: each lever moved alone from the shipped design (recall @1/@5/@10, leads over the best baseline)")
    print(f"{'lever':<28} | {header}")
    table = {}
    for lever, values in SENSITIVITY.items():
        for value in values:
            d = SHIPPED.but(**{lever: value})
            mark = " *" if value == getattr(SHIPPED, lever) else ""
            print(f"{lever + ' = ' + str(value) + mark:<28} | {_cells(scorer, d)}")
            table[f"{lever}={value}"] = {n: scorer.score(n, d)[0].tolist() for n in scorer.sets}
    return {"best_baseline": {n: v.tolist() for n, v in scorer.best_baseline.items()}, "sensitivity": table}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        # `python -m bench.retrieval` pickles its classes as __main__'s
        found: type = super().find_class("bench.retrieval" if module == "__main__" else module, name)
        return found


def load_queries(path: Path) -> dict[str, list[Query]]:
    """The queries `python -m bench.retrieval --save-queries FILE` saved."""
    with path.open("rb") as file:
        queries: dict[str, list[Query]] = _Unpickler(file).load()
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description="The design sweep alone, on the queries a retrieval run saved")
    parser.add_argument("queries", type=Path, help="written by python -m bench.retrieval --save-queries FILE")
    report(load_queries(parser.parse_args().queries))


if __name__ == "__main__":
    main()
