"""Retrieval benchmark: every evaluation set through the service's archival search, against baselines computed in
the same run on the very vectors the service stored, and the sensitivity of the hybrid design.

Sets (bench/retrieval_sets.py): LongMemEval dev (28 long mixed-topic haystacks), LoCoMo dev (5 two-person
conversations, 760 questions) and the Japanese set. Each corpus goes into its own agent through
ArchivalMemory.add(), one turn per passage, dated by its session (a near-duplicate turn is folded into an earlier
passage, which then stands for both). Each question is searched with ArchivalMemory.search(k=10) in the hybrid,
vector and text modes.
Baselines, on the passages and vectors read back from the database: exact cosine, BM25 Okapi (`rank_bm25` over
lower-cased words) and reciprocal-rank fusion (k=60) of the two (bench/fusion_replica.py).

Printed per set: evidence recall @1/@3/@5/@10 of every method, recall@5 per question category, search latency;
then the design's sensitivity table (bench/design_sweep.py): each lever moved alone from the shipped design,
scored on every set by a replica of the hybrid statement, with the protocol that chose the shipped values.

    python -m bench.retrieval --cache DIR      # LongMemEval is ~14k turns: an hour of embedding on 2 cores the
                                               # first time; re-runs with the cache take a few minutes
    python -m bench.retrieval --limit 3        # the first 3 corpora of each set
    python -m bench.retrieval --json out.json  # also dump every figure
    python -m bench.retrieval --save-queries q.pickle && python -m bench.design_sweep q.pickle   # the sweep alone, again
"""

import argparse
import asyncio
import json
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app import db
from app.agents.models import Agent
from app.auth.models import DEFAULT_TENANT_ID
from app.llm.embeddings import Embedder, build_embedder
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.archival.validity import CURRENT, Validity
from app.memory.kinds import TABLES
from app.memory.search import agent_indexes
from app.memory.search.query import Mode, SearchQuery
from app.settings import Settings
from bench import design_sweep, fusion_replica
from bench.embedding_cache import CachedEmbedder
from bench.retrieval_sets import DEFAULT_SETS, KS, SETS, Corpus, Question, RetrievalSet

if TYPE_CHECKING:  # pgserver is imported where the database is started
    from pgserver.postgres_server import PostgresServer

MODES: tuple[Mode, ...] = ("hybrid", "vector", "text")
BASELINES = ("cosine", "bm25", "rrf k=60")


@dataclass
class Stored:
    """One corpus as the service stored it: its agent, its passages (content, vector) and the turns each stands for."""

    corpus: Corpus
    agent_id: uuid.UUID
    passage_ids: list[uuid.UUID]
    turns: list[list[int]]  # per stored passage, the corpus turns it stands for
    index: fusion_replica.Indexed

    @cached_property
    def position(self) -> dict[uuid.UUID, int]:
        return {pid: j for j, pid in enumerate(self.passage_ids)}

    def recall(self, question: Question, ranked_passages: list[int]) -> list[float]:
        """Evidence recall at each of KS, the turns a passage stands for counted as found with it."""
        covered = [self.turns[j] for j in ranked_passages]
        return [len(question.evidence & set().union(*covered[:k])) / len(question.evidence) for k in KS]


def start_database(root: Path, embedding_dim: int = 384) -> tuple["PostgresServer", str]:
    from pgserver.postgres_server import get_server

    server = get_server(root / "pgdata", cleanup_mode="delete")
    server.psql('CREATE DATABASE "engram_bench";')
    url = db.asyncpg_url(server.get_uri("engram_bench"))
    db.run_migrations(url, embedding_dim)
    return server, url


async def ingest(
    sessions: async_sessionmaker[AsyncSession], embedder: Embedder, corpus: Corpus, batch: int, *, dated: bool = False
) -> Stored:
    """`dated`: each passage dated by the corpus (occurred_at); else when it is stored, as an undated import would be."""
    position: dict[uuid.UUID, int] = {}
    ids: list[uuid.UUID] = []
    turns: list[list[int]] = []
    async with db.transaction(sessions) as session:
        agent = Agent(tenant_id=DEFAULT_TENANT_ID, name=f"bench {corpus.name}")
        session.add(agent)
        await session.flush()
        memory = ArchivalMemory(session, embedder)
        for start in range(0, len(corpus.passages), batch):
            dates = corpus.dates[start : start + batch] if dated and corpus.dates else [None] * batch
            chunk = corpus.passages[start : start + batch]
            stored = await memory.add(
                agent.id, [NewPassage(content=p, occurred_at=d) for p, d in zip(chunk, dates, strict=False)]
            )
            for offset, s in enumerate(stored):
                if s.passage.id not in position:
                    position[s.passage.id] = len(ids)
                    ids.append(s.passage.id)
                    turns.append([])
                turns[position[s.passage.id]].append(start + offset)
    async with sessions() as session:  # a large agent's own vector index, as the service's background round builds it
        assert isinstance(session.bind, AsyncEngine)  # the factory's bind (db.session_factory(engine))
        await agent_indexes.maintain_once(session.bind, TABLES)
    async with sessions() as session:  # the stored vectors, as the baselines' input
        rows = (
            await (await session.connection()).execute(
                text("SELECT id, content, embedding::text, occurred_at FROM archival_passages WHERE agent_id = :a").bindparams(
                    a=agent.id
                )
            )
        ).all()
    by_id = {r[0]: (r[1], np.asarray(json.loads(r[2]), dtype=np.float32), r[3]) for r in rows}
    contents = [by_id[i][0] for i in ids]
    vectors = np.stack([by_id[i][1] for i in ids])
    occurred = np.array([by_id[i][2].astimezone(UTC).replace(tzinfo=None) for i in ids], dtype="datetime64[us]")
    return Stored(corpus, agent.id, ids, turns, fusion_replica.Indexed(contents, vectors, occurred))


async def search(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    stored: Stored,
    question: Question,
    mode: Mode,
    *,
    as_of: bool = False,
) -> tuple[list[int], float]:
    """`as_of`: asked as of the question's date (what was valid then), else of now."""
    validity = Validity(as_of=question.asked_at) if as_of and question.asked_at else CURRENT
    async with sessions() as session:
        started = time.perf_counter()
        query = SearchQuery(question.text, k=max(KS), mode=mode)
        matches = await ArchivalMemory(session, embedder).search(stored.agent_id, query, validity=validity)
        elapsed = (time.perf_counter() - started) * 1000
    return [stored.position[p.id] for p, _ in matches], elapsed


async def run_set(
    sessions: async_sessionmaker[AsyncSession], embedder: Embedder, retrieval_set: RetrievalSet, batch: int, repeats: int
) -> dict[str, Any]:
    """Per method: recall@KS per question (with its category); hybrid latencies; the stored corpora."""
    stored = []
    for i, corpus in enumerate(retrieval_set.corpora, 1):
        stored.append(await ingest(sessions, embedder, corpus, batch, dated=True))  # dated as the set dates it
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
        print(f"  {retrieval_set.name}: ingested {i}/{len(retrieval_set.corpora)}", file=sys.stderr)
    for s in stored[:2]:  # warm-up: connection pool, plans, index pages
        for mode in MODES:
            await search(sessions, embedder, s, s.corpus.questions[0], mode)
    rows: dict[str, list[tuple[str, list[float]]]] = {m: [] for m in (*MODES, *BASELINES)}
    latency: dict[str, list[float]] = {m: [] for m in MODES}
    queries = []
    agreement = []  # per question: does the replica rank as the service's hybrid search did?
    for s in stored:
        for q in s.corpus.questions:
            query_vector = np.asarray(await embedder.embed_query(q.text), dtype=np.float32)
            queries.append((s, q, query_vector))
            if not q.evidence:
                continue
            for mode in MODES:
                for _ in range(repeats):
                    ranking, ms = await search(sessions, embedder, s, q, mode)
                    latency[mode].append(ms)
                rows[mode].append((q.category, s.recall(q, ranking)))
                if mode == "hybrid":
                    agreement.append(fusion_replica.engram(s.index, q.text, query_vector, max(KS)) == ranking)
            for name, ranking in fusion_replica.baselines(s.index, q.text, query_vector, max(KS)).items():
                rows[name].append((q.category, s.recall(q, ranking)))
    return {"rows": rows, "latency": latency, "queries": queries, "replica_agreement": float(np.mean(agreement))}


def summary(rows: list[tuple[str, list[float]]]) -> dict[str, Any]:
    categories = sorted({c for c, _ in rows})
    return {
        "recall": [float(x) for x in np.mean([r for _, r in rows], axis=0)],
        "recall@5 by category": {c: float(np.mean([r[KS.index(5)] for cat, r in rows if cat == c])) for c in categories},
        "n by category": {c: sum(cat == c for cat, _ in rows) for c in categories},
    }


def print_set(name: str, result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    figures = {method: summary(rows) for method, rows in result["rows"].items()}
    n = len(result["rows"]["hybrid"])
    print(f"\n== {name}: {n} questions with evidence; evidence recall @{'/@'.join(map(str, KS))} (k=10)")
    categories = list(figures["hybrid"]["recall@5 by category"])
    counts = figures["hybrid"]["n by category"]
    header = f"{'method':<16} | {'recall @' + '/'.join(map(str, KS)):<27} | recall@5: " + " ".join(
        f"{c[:12]:>12}" for c in categories
    )
    print(header + "\n" + " " * 47 + " ".join(f"{'n=' + str(counts[c]):>12}" for c in categories))
    for method, f in figures.items():
        label = f"Engram {method}" if method in MODES else f"baseline {method}"
        cells = " / ".join(f"{v:.3f}" for v in f["recall"])
        print(f"{label:<16} | {cells:<27} | {'':10}" + " ".join(f"{f['recall@5 by category'][c]:12.3f}" for c in categories))
    best = {k: max(figures[b]["recall"][i] for b in BASELINES) for i, k in enumerate(KS)}
    hybrid = figures["hybrid"]["recall"]
    print("hybrid - best baseline: " + "  ".join(f"@{k} {hybrid[i] - best[k]:+.3f}" for i, k in enumerate(KS)))
    lat = result["latency"]
    print(
        f"search latency (query vector cached): hybrid p50 {np.percentile(lat['hybrid'], 50):.1f} ms, p95 "
        f"{np.percentile(lat['hybrid'], 95):.1f} ms; vector p50 {np.percentile(lat['vector'], 50):.1f} ms; text p50 "
        f"{np.percentile(lat['text'], 50):.1f} ms. Replica = service hybrid top 10 for {result['replica_agreement']:.3f} of questions"
    )
    return figures


def code_version() -> str:
    """The commit benchmarked, and whether app/ had uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True
        ).stdout.strip()

    return (git("rev-parse", "--short", "HEAD") or "unknown") + (
        " + uncommitted app changes" if git("status", "--porcelain", "app") else ""
    )


async def bench(url: str, sets: list[RetrievalSet], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    embedder: Embedder = build_embedder(Settings())
    if args.cache:
        embedder = CachedEmbedder(embedder, args.cache)
    try:
        return {s.name: await run_set(sessions, embedder, s, args.batch, args.repeats) for s in sets}
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, help="only the first N corpora of each set")
    parser.add_argument(
        "--sets",
        nargs="+",
        choices=list(SETS),
        default=DEFAULT_SETS,
        help=f"the sets to run (default: {' '.join(DEFAULT_SETS)}; longmemeval-one-agent, the large agent, takes ~4 min more)",
    )
    parser.add_argument("--batch", type=int, default=128, help="turns per ArchivalMemory.add() call")
    parser.add_argument("--repeats", type=int, default=3, help="times each search is timed (latency percentiles)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--no-sweep", action="store_true", help="skip the sensitivity table")
    parser.add_argument("--cache", type=Path, help="keep embeddings in this folder across runs")
    parser.add_argument(
        "--save-queries", type=Path, help="pickle every set's stored corpora and queries here (python -m bench.design_sweep FILE)"
    )
    args = parser.parse_args()

    wall, version = time.perf_counter(), code_version()
    sets = [SETS[name](limit=args.limit) for name in args.sets]
    root = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    server, url = start_database(root, build_embedder(Settings()).dim)
    try:
        results = asyncio.run(bench(url, sets, args))
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"Code: {version}; "
        + "; ".join(f"{s.name}: {len(s.corpora)} corpora, {sum(len(c.passages) for c in s.corpora)} turns" for s in sets)
    )
    figures = {name: print_set(name, result) for name, result in results.items()}
    if args.save_queries:
        args.save_queries.write_bytes(pickle.dumps({name: r["queries"] for name, r in results.items()}))
    if not args.no_sweep:
        figures["sweep"] = design_sweep.report({name: r["queries"] for name, r in results.items()})
    print(f"\nWall time: {time.perf_counter() - wall:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
