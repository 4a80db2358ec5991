"""Retrieval benchmark of archival memory on a 28-question slice of LongMemEval_S.

Each question gets its own agent; every turn of its haystack ("role: content", first 2,000 characters) goes through
ArchivalMemory.add() (a near-duplicate turn may be folded into an earlier passage, which then stands for both), and
the question is searched with ArchivalMemory.search(k=10) in the vector, text and hybrid modes. Printed: evidence-turn
recall@1/5/10 (turns with has_answer) and answer-session hit@1/5/10; search latency and ingest throughput;
calibration data for the relevance gate of automatic recollection (similarity, margin over the query's baseline,
fused score and lexical coverage of evidence vs other hits, and of hits from another question's agent); and the reference
baseline computed outside the service, per turn: exact cosine over the vectors the embedder returned at ingest,
BM25Okapi on lower-cased \\w+ tokens, RRF (k=60) over the top 100 of each. BM25/RRF need `pip install rank_bm25`
(a local extra, not a project dependency); without it only the dense baseline is shown.

Run from the repository root in the virtualenv (a private PostgreSQL in a temp dir; no network), with the embedder
the environment configures (default multilingual-e5-small):

    python bench/retrieval.py                  # full run: ~14k turns, about an hour on 2 CPU cores (embedding)
    python bench/retrieval.py --cache DIR      # keep the vectors in DIR: re-runs take ~2 minutes
    python bench/retrieval.py --limit 3        # quick run on the first 3 questions
    python bench/retrieval.py --json out.json  # also dump every figure, per-call latencies included
"""

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import db  # noqa: E402
from app.agents.models import Agent  # noqa: E402
from app.auth.models import DEFAULT_TENANT_ID  # noqa: E402
from app.llm.embeddings import Embedder, build_embedder  # noqa: E402
from app.memory import lexical  # noqa: E402
from app.memory.background import baseline  # noqa: E402
from app.memory.recollection import MIN_COVERAGE, MIN_MARGIN, coverage, relevant  # noqa: E402
from app.memory.service import ArchivalMemory  # noqa: E402
from app.settings import Settings  # noqa: E402
from bench.embedding_cache import CachedEmbedder  # noqa: E402

DEFAULT_DATA = Path("/work/shared/data/longmemeval_s_dev28.json")
MODES = ("vector", "text", "hybrid")
KS = (1, 5, 10)
MAX_CHARS = 2000
RRF_K, RRF_CANDIDATES = 60, 100
PERCENTILES = (10, 25, 50, 75, 90)
SIMILARITY_GRID = [round(0.60 + 0.025 * i, 3) for i in range(15)]  # 0.600 .. 0.950
MARGIN_GRID = [round(0.01 * i, 2) for i in range(16)]  # 0.00 .. 0.15
COVERAGE_GRID = [round(0.2 + 0.1 * i, 1) for i in range(9)]  # 0.2 .. 1.0
GATE_K = Settings.model_fields["auto_retrieval_k"].default  # hits automatic recollection looks at
WORD = re.compile(r"\w+")
Ranking = list[list[int]]  # per rank position, the haystack turns (indices) that result stands for


@dataclass
class Corpus:
    """One question's haystack as ingested, turn by turn, and which turns each stored passage stands for."""

    question: dict
    agent_id: uuid.UUID
    turns: list[tuple[str, int, bool]]  # (session_id, turn index in session, has_answer)
    texts: list[str]
    vectors: np.ndarray  # per turn, as the embedder returned it
    passage_turns: dict[uuid.UUID, list[int]] = field(default_factory=dict)

    @property
    def evidence(self) -> set[int]:
        return {i for i, (_, _, has_answer) in enumerate(self.turns) if has_answer}


class RecordingEmbedder:
    """Wraps the embedder: times each call (ingest: embedding vs database; search: the query) and keeps the last
    passage vectors (the per-turn vectors of the baseline, so turns are embedded once)."""

    def __init__(self, inner: Embedder):
        self.inner, self.model, self.dim, self.calls_ms, self.last = inner, inner.model, inner.dim, [], []

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        start = time.perf_counter()
        self.last = await self.inner.embed_passages(texts)
        self.calls_ms.append((time.perf_counter() - start) * 1000)
        return self.last

    async def embed_query(self, text: str) -> list[float]:
        start = time.perf_counter()
        vector = await self.inner.embed_query(text)
        self.calls_ms.append((time.perf_counter() - start) * 1000)
        return vector


# ---------------------------------------------------------------- data and service side


def _parsed(value):
    """Some exports store lists/objects as JSON text; accept both."""
    return json.loads(value) if isinstance(value, str) and value.strip()[:1] in ("[", "{") else value


def load_questions(path: Path, limit: int | None) -> list[dict]:
    questions = _parsed(json.loads(path.read_text()))[: limit or None]
    for q in questions:
        for key in ("answer_session_ids", "haystack_session_ids"):
            q[key] = _parsed(q[key])
        q["haystack_sessions"] = [[_parsed(t) for t in _parsed(s)] for s in _parsed(q["haystack_sessions"])]
    return questions


def turns_of(question: dict) -> list[tuple[str, tuple[str, int, bool]]]:
    """(passage text, (session_id, turn index, has_answer)) for every turn of the haystack, in order."""
    out = []
    for session_id, session in zip(question["haystack_session_ids"], question["haystack_sessions"], strict=True):
        for index, turn in enumerate(session):
            has_answer = str(turn.get("has_answer", False)).lower() == "true"
            out.append((f"{turn['role']}: {turn['content']}"[:MAX_CHARS], (session_id, index, has_answer)))
    return out


def start_database(root: Path, embedding_dim: int = 384):
    import pgserver

    server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    server.psql('CREATE DATABASE "engram_bench";')
    url = db.asyncpg_url(server.get_uri("engram_bench"))
    db.run_migrations(url, embedding_dim)
    return server, url


async def ingest(sessions, embedder: RecordingEmbedder, question: dict, batch: int) -> Corpus:
    turns = turns_of(question)
    vectors: list[list[float]] = []
    async with db.transaction(sessions) as session:
        agent = Agent(tenant_id=DEFAULT_TENANT_ID, name=f"bench {question['question_id']}")
        session.add(agent)
        await session.flush()
        corpus = Corpus(question, agent.id, [meta for _, meta in turns], [text for text, _ in turns], np.empty(0))
        memory = ArchivalMemory(session, embedder)
        for start in range(0, len(turns), batch):
            stored = await memory.add(agent.id, [(text, []) for text, _ in turns[start : start + batch]])
            vectors += embedder.last
            for offset, s in enumerate(stored):
                corpus.passage_turns.setdefault(s.passage.id, []).append(start + offset)
    corpus.vectors = np.asarray(vectors, dtype=np.float32)
    return corpus


async def search(sessions, embedder, agent_id: uuid.UUID, query: str, mode: str):
    async with sessions() as session:
        start = time.perf_counter()
        matches = await ArchivalMemory(session, embedder).search(agent_id, query, k=max(KS), mode=mode)
        return matches, (time.perf_counter() - start) * 1000


async def run_service(sessions, embedder: RecordingEmbedder, corpora: list[Corpus], repeats: int) -> dict:
    """Per mode: rankings and latencies (each search timed `repeats` times). Also the hybrid matches, and those
    of the same question asked of the next question's agent."""
    for c in corpora[:3]:  # warm-up: model, connection pool, plans, index pages
        for mode in MODES:
            await search(sessions, embedder, c.agent_id, c.question["question"], mode)
    embedder.calls_ms.clear()
    out = {"rankings": {m: [] for m in MODES}, "latency_ms": {m: [] for m in MODES}, "hybrid": [], "cross": []}
    for i, c in enumerate(corpora):
        for mode in MODES:
            for _ in range(repeats):
                matches, ms = await search(sessions, embedder, c.agent_id, c.question["question"], mode)
                out["latency_ms"][mode].append(ms)
            out["rankings"][mode].append([c.passage_turns[m.passage.id] for m in matches])
            if mode == "hybrid":
                out["hybrid"].append(matches)
        if len(corpora) > 1:
            other = corpora[(i + 1) % len(corpora)]
            out["cross"].append((await search(sessions, embedder, other.agent_id, c.question["question"], "hybrid"))[0])
    return out


# ---------------------------------------------------------------- reference baseline (outside the service)


def baseline_rankings(corpus: Corpus, query_vector: np.ndarray, bm25_cls) -> dict[str, Ranking]:
    dense = np.argsort(-(corpus.vectors @ query_vector), kind="stable")
    out = {"baseline dense": dense}
    if bm25_cls is not None:
        bm25 = bm25_cls([WORD.findall(t.lower()) for t in corpus.texts])
        lexical_rank = np.argsort(-bm25.get_scores(WORD.findall(corpus.question["question"].lower())), kind="stable")
        fused: dict[int, float] = {}
        for ranking in (dense, lexical_rank):
            for rank, index in enumerate(ranking[:RRF_CANDIDATES], start=1):
                fused[int(index)] = fused.get(int(index), 0.0) + 1.0 / (RRF_K + rank)
        out["baseline bm25"] = lexical_rank
        out["baseline rrf"] = sorted(fused, key=lambda i: -fused[i])
    return {name: [[int(i)] for i in ranking[: max(KS)]] for name, ranking in out.items()}


async def run_baseline(embedder: Embedder, corpora: list[Corpus]) -> dict[str, list[Ranking]]:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        BM25Okapi = None
        print("rank_bm25 not installed: baseline limited to exact dense (pip install rank_bm25 for BM25/RRF)")
    query_vectors = [await embedder.embed_query(c.question["question"]) for c in corpora]
    out: dict[str, list[Ranking]] = {}
    for c, qv in zip(corpora, query_vectors, strict=False):
        for name, ranking in baseline_rankings(c, np.asarray(qv, dtype=np.float32), BM25Okapi).items():
            out.setdefault(name, []).append(ranking)
    return out


# ---------------------------------------------------------------- metrics


def covered(ranking: Ranking, k: int) -> set[int]:
    return set().union(*ranking[:k])


def retrieval_metrics(corpora: list[Corpus], rankings: list[Ranking]) -> dict:
    recall, hit_all, hit_ev = [], [], []
    for c, ranking in zip(corpora, rankings, strict=False):
        evidence, answers = c.evidence, set(c.question["answer_session_ids"])
        hits = [float(any(c.turns[i][0] in answers for i in covered(ranking, k))) for k in KS]
        hit_all += [hits] if answers else []
        if evidence:
            recall.append([len(evidence & covered(ranking, k)) / len(evidence) for k in KS])
            hit_ev.append(hits)
    mean = lambda rows: [float(x) for x in np.mean(rows, axis=0)] if rows else [float("nan")] * len(KS)  # noqa: E731
    return {
        "turn_recall": mean(recall),
        "session_hit": mean(hit_all),
        "session_hit_evidence_qs": mean(hit_ev),
        "n_evidence_qs": len(recall),
        "n_answer_qs": len(hit_all),
    }


def top10_overlap(service: list[Ranking], exact: list[Ranking]) -> float:
    """Share of the exact top-10 turns that the service's top 10 covers."""
    return float(
        np.mean(
            [len(covered(s, 10) & covered(e, 10)) / max(len(covered(e, 10)), 1) for s, e in zip(service, exact, strict=False)]
        )
    )


def calibration(corpora: list[Corpus], hybrid: list, cross: list, baselines: list[float]) -> dict:
    """`baselines`: per question, its similarity to generic text (app/memory/background.py); margin = similarity
    minus baseline, as the recollection gate computes it."""
    groups = ("evidence top10", "other top10", "evidence top5", "other top5", "cross-agent top1", f"cross-agent top{GATE_K}")
    values = {g: {"similarity": [], "margin": [], "score": [], "coverage": []} for g in groups}
    gate_cross = []  # per question: does any cross-agent top-GATE_K hit pass the shipped gate?

    def record(group: str, match, tokens: set[str], base: float) -> bool:
        cov = coverage(tokens, match.passage.search_text)
        for key, value in (
            ("similarity", match.similarity),
            ("margin", match.similarity - base),
            ("score", match.score),
            ("coverage", cov),
        ):
            values[group][key].append(value)
        return relevant(match.similarity - base, cov)

    for c, matches, other, base in zip(corpora, hybrid, cross + [[]] * (len(corpora) - len(cross)), baselines, strict=False):
        tokens, evidence = set(lexical.tokens(c.question["question"])), c.evidence
        for rank, m in enumerate(matches):
            kind = "evidence" if evidence & set(c.passage_turns[m.passage.id]) else "other"
            for group in [f"{kind} top10"] + ([f"{kind} top5"] if rank < 5 else []):
                record(group, m, tokens, base)
        if other:
            record("cross-agent top1", other[0], tokens, base)
            gate_cross.append(any([record(f"cross-agent top{GATE_K}", m, tokens, base) for m in other[:GATE_K]]))
    kept = lambda xs, t: float(np.mean([x >= t for x in xs])) if xs else float("nan")  # noqa: E731
    grid_groups = ("evidence top5", "other top5", "cross-agent top1")
    grids = {
        key: [{"threshold": t, **{g: kept(values[g][key], t) for g in grid_groups}} for t in thresholds]
        for key, thresholds in (("similarity", SIMILARITY_GRID), ("margin", MARGIN_GRID), ("coverage", COVERAGE_GRID))
    }
    gate = {
        g: float(
            np.mean([relevant(mg, cv) for mg, cv in zip(values[g]["margin"], values[g]["coverage"], strict=False)] or [np.nan])
        )
        for g in ("evidence top5", "other top5")
    }
    gate["cross-agent questions with a hit kept"] = float(np.mean(gate_cross)) if gate_cross else float("nan")
    return {"values": values, "grids": grids, "shipped_gate": gate}


# ---------------------------------------------------------------- output


def print_metrics(metrics: dict[str, dict]) -> None:
    first = next(iter(metrics.values()))
    print(
        f"\nRetrieval (k=10). Turn recall over the {first['n_evidence_qs']} questions with evidence turns; session hit "
        f"over all {first['n_answer_qs']} questions, and over the {first['n_evidence_qs']} (as the reference counts it)."
    )
    print(f"{'method':<16} | {'turn recall @1/@5/@10':<22} | {'session hit @1/@5/@10':<22} | hit, evidence Qs")
    print("-" * 88)
    for name, m in metrics.items():
        cells = [" / ".join(f"{v:.3f}" for v in m[key]) for key in ("turn_recall", "session_hit", "session_hit_evidence_qs")]
        print(f"{name:<16} | {cells[0]:<22} | {cells[1]:<22} | {cells[2]}")


def print_calibration(cal: dict) -> None:
    for key in ("similarity", "margin", "score", "coverage"):
        print(f"\nHybrid hits: {key} percentiles")
        print(f"{'group':<18} {'n':>5} " + " ".join(f"{'p' + str(p):>6}" for p in PERCENTILES))
        for group, vals in cal["values"].items():
            pct = np.percentile(vals[key], PERCENTILES) if vals[key] else [float("nan")] * len(PERCENTILES)
            print(f"{group:<18} {len(vals[key]):>5} " + " ".join(f"{v:6.3f}" for v in pct))
    for key, grid in cal["grids"].items():
        print(f"\n{key.capitalize()} threshold t: fraction of hits with {key} >= t")
        print(f"{'t':>5}  {'evidence top5':>14}  {'other top5':>11}  {'cross-agent top1':>17}")
        for row in grid:
            print(
                f"{row['threshold']:5.3f}  {row['evidence top5']:14.3f}  {row['other top5']:11.3f}  {row['cross-agent top1']:17.3f}"
            )
    gate = cal["shipped_gate"]
    print(
        f"\nShipped gate (margin >= {MIN_MARGIN} or coverage >= {MIN_COVERAGE}): keeps {gate['evidence top5']:.3f} "
        f"of evidence top-5 hits, {gate['other top5']:.3f} of other top-5 hits; asked of another agent, "
        f"{gate['cross-agent questions with a hit kept']:.3f} of questions get at least one of the top {GATE_K} injected"
    )


# ---------------------------------------------------------------- main


def code_version() -> str:
    """The commit benchmarked, and whether app/ or alembic/ had uncommitted changes."""

    def git(*args: str) -> str:
        root = Path(__file__).resolve().parent.parent
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()

    dirty = " + uncommitted app changes" if git("status", "--porcelain", "app", "alembic") else ""
    return (git("rev-parse", "--short", "HEAD") or "unknown") + dirty


async def bench(url: str, questions: list[dict], batch: int, repeats: int, cache: Path | None) -> dict:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    base: Embedder = build_embedder(Settings())
    if cache:
        base = cached = CachedEmbedder(base, cache)
    embedder = RecordingEmbedder(base)
    try:
        start, corpora = time.perf_counter(), []
        for i, q in enumerate(questions, 1):
            corpora.append(await ingest(sessions, embedder, q, batch))
            if cache:
                cached.save()
            print(
                f"  ingested {i}/{len(questions)} ({len(corpora[-1].turns)} turns, {time.perf_counter() - start:.0f}s)",
                file=sys.stderr,
            )
        ingest_s, embed_s = time.perf_counter() - start, sum(embedder.calls_ms) / 1000
        service = await run_service(sessions, embedder, corpora, repeats)
        reference = await run_baseline(base, corpora)
        baselines = [await baseline(base, await base.embed_query(c.question["question"])) for c in corpora]
    finally:
        await engine.dispose()
    n_turns, lat = sum(len(c.turns) for c in corpora), service["latency_ms"]
    return {
        "questions": len(corpora),
        "ingest": {
            "turns": n_turns,
            "passages_stored": sum(len(c.passage_turns) for c in corpora),
            "seconds": ingest_s,
            "turns_per_s": n_turns / ingest_s,
            "embedding_seconds": embed_s,
        },
        "latency_ms": {
            "hybrid_p50": float(np.percentile(lat["hybrid"], 50)),
            "hybrid_p95": float(np.percentile(lat["hybrid"], 95)),
            "vector_p50": float(np.percentile(lat["vector"], 50)),
            "text_p50": float(np.percentile(lat["text"], 50)),
            "query_embedding_p50": float(np.percentile(embedder.calls_ms, 50)),
            "per_call": lat,
        },
        "metrics": {
            name: retrieval_metrics(corpora, r)
            for name, r in ({f"service {m}": service["rankings"][m] for m in MODES} | reference).items()
        },
        "hnsw_vs_exact_top10_overlap": top10_overlap(service["rankings"]["vector"], reference["baseline dense"]),
        "calibration": calibration(corpora, service["hybrid"], service["cross"], baselines),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--batch", type=int, default=128, help="turns per ArchivalMemory.add() call")
    parser.add_argument("--repeats", type=int, default=3, help="times each search is timed (latency percentiles)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--cache",
        type=Path,
        help="keep embeddings in this folder across runs (re-runs then cost "
        "database time only; the ingest and query-embedding timings no longer measure the embedder)",
    )
    args = parser.parse_args()

    wall, version = time.perf_counter(), code_version()
    questions = load_questions(args.data, args.limit)
    root = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    server, url = start_database(root, build_embedder(Settings()).dim)
    try:
        figures = asyncio.run(bench(url, questions, args.batch, args.repeats, args.cache))
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    figures["wall_seconds"], figures["code"] = time.perf_counter() - wall, version

    ing, lat = figures["ingest"], figures["latency_ms"]
    print(
        f"\nCode: {version}. LongMemEval_S dev slice: {figures['questions']} questions, {ing['turns']} turns "
        f"({ing['passages_stored']} passages stored; the rest folded into near-duplicates)"
    )
    print_metrics(figures["metrics"])
    print(f"\nService vector (HNSW) vs exact cosine: top-10 overlap {figures['hnsw_vs_exact_top10_overlap']:.3f}")
    print(
        f"\nIngest: {ing['turns']} turns in {ing['seconds']:.1f}s = {ing['turns_per_s']:.1f} turns/s (ArchivalMemory.add "
        f"in batches of {args.batch}: {ing['embedding_seconds']:.1f}s embedding, {ing['seconds'] - ing['embedding_seconds']:.1f}s database)"
    )
    print(
        f"Search latency ({args.repeats} x {figures['questions']} calls per mode, k=10, incl. query embedding p50 "
        f"{lat['query_embedding_p50']:.1f} ms): hybrid p50 "
        f"{lat['hybrid_p50']:.1f} ms, p95 {lat['hybrid_p95']:.1f} ms; vector p50 {lat['vector_p50']:.1f} ms; "
        f"text p50 {lat['text_p50']:.1f} ms"
    )
    print_calibration(figures["calibration"])
    print(f"\nWall time: {figures['wall_seconds']:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
