"""Dated memories on LongMemEval dev: the same haystacks stored undated (every passage dated when it is stored, as an
import without dates lands) and dated (each turn's `occurred_at` = its session's `haystack_dates`), each question
searched as of now and, dated, as of its `question_date` (`as_of`: what had happened and was valid then). Evidence
recall per question type through ArchivalMemory.search (k=10, hybrid), knowledge-update and temporal-reasoning first.

Storing and reading facts by date is what this measures; superseding a fact takes a model's judgement (the agent's
archival_memory_supersede, a memory pass), which a replay of a haystack has none of.

    python -m bench.dated_recall --cache DIR   # shares bench/retrieval.py's embedding cache (first run: ~1 h)
    python -m bench.dated_recall --cache DIR --types knowledge-update temporal-reasoning   # 10 of the 28 haystacks
"""

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from app import db
from app.llm.embeddings import Embedder, build_embedder
from app.settings import Settings
from bench.embedding_cache import CachedEmbedder
from bench.retrieval import code_version, ingest, search, start_database
from bench.retrieval_sets import KS, longmemeval

FIRST = ("knowledge-update", "temporal-reasoning")
RUNS = {  # name: (stored dated, asked as of the question's date)
    "undated": (False, False),
    "dated, asked now": (True, False),
    "dated, as_of question_date": (True, True),
}


async def bench(url: str, args: argparse.Namespace) -> dict[str, dict[str, list[list[float]]]]:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    embedder: Embedder = build_embedder(Settings())
    if args.cache:
        embedder = CachedEmbedder(embedder, args.cache)
    corpora = [
        c for c in longmemeval(limit=args.limit).corpora if not args.types or any(q.category in args.types for q in c.questions)
    ]
    recalls: dict[str, dict[str, list[list[float]]]] = {run: {} for run in RUNS}
    try:
        for i, corpus in enumerate(corpora, 1):
            stored = {dated: await ingest(sessions, embedder, corpus, args.batch, dated=dated) for dated in (False, True)}
            if isinstance(embedder, CachedEmbedder):
                embedder.save()
            for run, (dated, as_of) in RUNS.items():
                for question in (q for q in corpus.questions if q.evidence):  # an abstention has nothing to find
                    ranking, _ = await search(sessions, embedder, stored[dated], question, "hybrid", as_of=as_of)
                    recalls[run].setdefault(question.category, []).append(stored[dated].recall(question, ranking))
            print(f"  LongMemEval dev: {i}/{len(corpora)}", file=sys.stderr)
            if args.partial:
                report(recalls, f"{i} of {len(corpora)} haystacks")
    finally:
        await engine.dispose()
    return recalls


def report(recalls: dict[str, dict[str, list[list[float]]]], done: str = "every haystack") -> None:
    categories = sorted(next(iter(recalls.values())), key=lambda c: (c not in FIRST, c))
    at5 = KS.index(5)
    print(
        f"\n== LongMemEval dev ({done}), evidence recall@5 (hybrid, k=10) per question type; last column: @{'/@'.join(map(str, KS))} of all"
    )
    print(f"{'run':<28}" + "".join(f"{c[:18]:>20}" for c in categories) + f"   {'all':>25}")
    print(" " * 28 + "".join(f"{'n=' + str(len(recalls['undated'][c])):>20}" for c in categories))
    for run, by_category in recalls.items():
        every = [r for c in categories for r in by_category[c]]
        cells = "".join(f"{np.mean([r[at5] for r in by_category[c]]):20.3f}" for c in categories)
        print(f"{run:<28}{cells}   {' / '.join(f'{v:.3f}' for v in np.mean(every, axis=0)):>25}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--types", nargs="+", help="only questions of these types (each is one ~500-turn haystack)")
    parser.add_argument("--partial", action="store_true", help="print the figures so far after each haystack")
    parser.add_argument("--batch", type=int, default=128, help="turns per ArchivalMemory.add() call")
    parser.add_argument("--cache", type=Path, help="keep embeddings in this folder across runs")
    args = parser.parse_args()
    wall, version = time.perf_counter(), code_version()
    root = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    server, url = start_database(root, build_embedder(Settings()).dim)
    try:
        recalls = asyncio.run(bench(url, args))
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    print(f"Code: {version}")
    report(recalls)
    print(f"\nWall time: {time.perf_counter() - wall:.0f}s")


if __name__ == "__main__":
    main()
