"""Retrieval benchmark of archival memory on a 28-question slice of LongMemEval_S.

Each question gets its own agent; every turn of its haystack becomes one archival passage ("role: content",
first 2,000 characters), ingested through the service's own ArchivalMemory.add(). The question text is then
searched through ArchivalMemory.search(k=10) in the vector, text and hybrid modes. Printed:

- evidence-turn recall@1/5/10 (turns marked has_answer; questions that have any) and answer-session hit@1/5/10
  (all questions; also over the questions with evidence turns, which is how the reference numbers were counted);
- search latency (wall clock per call, after a warm-up) and ingest throughput;
- calibration data for a relevance threshold: cosine similarity and fused score of evidence vs other hits in the
  hybrid top 10, and of the top hit when the question is asked of another question's agent (nothing relevant);
- the reference baseline computed outside the service: exact MiniLM cosine over the same vectors, BM25Okapi on
  lower-cased \\w+ tokens, and RRF (k=60) over the top 100 of each. BM25/RRF need `pip install rank_bm25`
  (a local benchmark extra, not a project dependency); without it only the exact dense row is shown.

Run from the repository root inside the virtualenv (starts a private PostgreSQL in a temp dir; no network):

    python bench/retrieval.py                  # full run: ~14k passages, several minutes on 2 CPU cores
    python bench/retrieval.py --limit 3        # quick run on the first 3 questions
    python bench/retrieval.py --json out.json  # also dump every figure (and the raw calibration values)
"""

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import db  # noqa: E402
from app.agents.models import Agent  # noqa: E402
from app.llm.embeddings import LocalEmbedder  # noqa: E402
from app.memory.service import ArchivalMemory  # noqa: E402

DEFAULT_DATA = Path("/work/shared/data/longmemeval_s_dev28.json")
MODES = ("vector", "text", "hybrid")
KS = (1, 5, 10)
MAX_CHARS = 2000
RRF_K, RRF_CANDIDATES = 60, 100
PERCENTILES = (10, 25, 50, 75, 90)
THRESHOLDS = [round(0.20 + 0.05 * i, 2) for i in range(11)]  # 0.20 .. 0.70
WORD = re.compile(r"\w+")


@dataclass
class Corpus:
    """One question's haystack as ingested: passage ids in haystack order and what each one is."""

    question: dict
    agent_id: uuid.UUID
    ids: list[uuid.UUID]
    meta: dict[uuid.UUID, tuple[str, int, bool]]  # passage id -> (session_id, turn index, has_answer)
    texts: list[str]
    vectors: np.ndarray

    @property
    def evidence(self) -> set[uuid.UUID]:
        return {pid for pid, (_, _, has_answer) in self.meta.items() if has_answer}


class TimedEmbedder:
    """Wraps an Embedder and records how long each call took (ingest: embedding vs database; search: the query)."""

    def __init__(self, inner: LocalEmbedder):
        self.inner, self.model, self.dim, self.calls_ms = inner, inner.model, inner.dim, []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return await self.inner.embed(texts)
        finally:
            self.calls_ms.append((time.perf_counter() - start) * 1000)


# ---------------------------------------------------------------- data

def _parsed(value):
    """Some exports store lists/objects as JSON text; accept both."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        return json.loads(value)
    return value


def load_questions(path: Path, limit: int | None) -> list[dict]:
    questions = _parsed(json.loads(path.read_text()))[: limit or None]
    for q in questions:
        for field in ("answer_session_ids", "haystack_session_ids", "haystack_sessions"):
            q[field] = _parsed(q[field])
        q["haystack_sessions"] = [[_parsed(t) for t in _parsed(s)] for s in q["haystack_sessions"]]
    return questions


def turns_of(question: dict) -> list[tuple[str, tuple[str, int, bool]]]:
    """(passage text, (session_id, turn index, has_answer)) for every turn of the haystack, in order."""
    out = []
    for session_id, session in zip(question["haystack_session_ids"], question["haystack_sessions"], strict=True):
        for index, turn in enumerate(session):
            has_answer = str(turn.get("has_answer", False)).lower() == "true"
            out.append((f"{turn['role']}: {turn['content']}"[:MAX_CHARS], (session_id, index, has_answer)))
    return out


# ---------------------------------------------------------------- service side

def start_database(root: Path):
    import pgserver

    server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    server.psql('CREATE DATABASE "engram_bench";')
    url = db.asyncpg_url(server.get_uri("engram_bench"))
    db.run_migrations(url, 384)
    return server, url


async def ingest(sessions, embedder, question: dict, batch: int) -> Corpus:
    turns = turns_of(question)
    ids, vectors = [], []
    async with db.transaction(sessions) as session:
        agent = Agent(name=f"bench {question['question_id']}")
        session.add(agent)
        await session.flush()
        memory = ArchivalMemory(session, embedder)
        for start in range(0, len(turns), batch):
            added = await memory.add(agent.id, [(text, []) for text, _ in turns[start : start + batch]])
            ids += [p.id for p in added]
            vectors += [p.embedding for p in added]
    return Corpus(question, agent.id, ids, {pid: meta for pid, (_, meta) in zip(ids, turns)},
                  [text for text, _ in turns], np.asarray(vectors, dtype=np.float32))


async def search(sessions, embedder, agent_id: uuid.UUID, query: str, mode: str):
    async with sessions() as session:
        start = time.perf_counter()
        matches = await ArchivalMemory(session, embedder).search(agent_id, query, k=max(KS), mode=mode)
        return matches, (time.perf_counter() - start) * 1000


async def run_service(sessions, embedder, corpora: list[Corpus]) -> dict:
    """Rankings and latencies per mode, the hybrid matches, and the top hybrid hit from another question's agent."""
    for c in corpora[:3]:  # warm-up: model, connection pool, plans, index pages
        for mode in MODES:
            await search(sessions, embedder, c.agent_id, c.question["question"], mode)
    embedder.calls_ms.clear()
    out = {"rankings": {m: [] for m in MODES}, "latency_ms": {m: [] for m in MODES}, "hybrid": [], "cross": []}
    for i, c in enumerate(corpora):
        for mode in MODES:
            matches, ms = await search(sessions, embedder, c.agent_id, c.question["question"], mode)
            out["rankings"][mode].append([m.passage.id for m in matches])
            out["latency_ms"][mode].append(ms)
            if mode == "hybrid":
                out["hybrid"].append(matches)
        if len(corpora) > 1:
            other = corpora[(i + 1) % len(corpora)]
            matches, _ = await search(sessions, embedder, other.agent_id, c.question["question"], "hybrid")
            if matches:
                out["cross"].append(matches[0])
    return out


# ---------------------------------------------------------------- reference baseline (outside the service)

def baseline_rankings(corpus: Corpus, query_vector: np.ndarray, bm25_cls) -> dict[str, list[uuid.UUID]]:
    dense = np.argsort(-(corpus.vectors @ query_vector), kind="stable")
    out = {"baseline dense": dense}
    if bm25_cls is not None:
        bm25 = bm25_cls([WORD.findall(t.lower()) for t in corpus.texts])
        lexical = np.argsort(-bm25.get_scores(WORD.findall(corpus.question["question"].lower())), kind="stable")
        fused: dict[int, float] = {}
        for ranking in (dense, lexical):
            for rank, index in enumerate(ranking[:RRF_CANDIDATES], start=1):
                fused[int(index)] = fused.get(int(index), 0.0) + 1.0 / (RRF_K + rank)
        out["baseline bm25"] = lexical
        out["baseline rrf"] = sorted(fused, key=lambda i: -fused[i])
    return {name: [corpus.ids[int(i)] for i in ranking[: max(KS)]] for name, ranking in out.items()}


async def run_baseline(embedder, corpora: list[Corpus]) -> dict[str, list[list[uuid.UUID]]]:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        BM25Okapi = None
        print("rank_bm25 not installed: baseline limited to exact dense (pip install rank_bm25 for BM25/RRF)")
    query_vectors = await embedder.embed([c.question["question"] for c in corpora])
    out: dict[str, list[list[uuid.UUID]]] = {}
    for c, qv in zip(corpora, query_vectors):
        for name, ranking in baseline_rankings(c, np.asarray(qv, dtype=np.float32), BM25Okapi).items():
            out.setdefault(name, []).append(ranking)
    return out


# ---------------------------------------------------------------- metrics

def retrieval_metrics(corpora: list[Corpus], rankings: list[list[uuid.UUID]]) -> dict:
    recall, hit_all, hit_ev = [], [], []
    for c, ranked in zip(corpora, rankings):
        evidence, answers = c.evidence, set(c.question["answer_session_ids"])
        hits = [float(any(c.meta[p][0] in answers for p in ranked[:k])) for k in KS]
        if answers:
            hit_all.append(hits)
        if evidence:
            recall.append([len(evidence & set(ranked[:k])) / len(evidence) for k in KS])
            hit_ev.append(hits)
    mean = lambda rows: [float(x) for x in np.mean(rows, axis=0)] if rows else [float("nan")] * len(KS)  # noqa: E731
    return {"turn_recall": mean(recall), "session_hit": mean(hit_all), "session_hit_evidence_qs": mean(hit_ev),
            "n_evidence_qs": len(recall), "n_answer_qs": len(hit_all)}


def top10_overlap(a: list[list[uuid.UUID]], b: list[list[uuid.UUID]]) -> float:
    return float(np.mean([len(set(x) & set(y)) / max(len(y), 1) for x, y in zip(a, b)]))


def calibration(corpora: list[Corpus], hybrid: list, cross: list) -> dict:
    values = {name: {"similarity": [], "score": []} for name in ("evidence top10", "other top10", "evidence top5",
                                                                   "other top5", "cross-agent top1")}
    for c, matches in zip(corpora, hybrid):
        for rank, m in enumerate(matches):
            kind = "evidence" if c.meta[m.passage.id][2] else "other"
            for group in [f"{kind} top10"] + ([f"{kind} top5"] if rank < 5 else []):
                values[group]["similarity"].append(m.similarity)
                values[group]["score"].append(m.score)
    for m in cross:
        values["cross-agent top1"]["similarity"].append(m.similarity)
        values["cross-agent top1"]["score"].append(m.score)
    kept = lambda xs, t: float(np.mean([x >= t for x in xs])) if xs else float("nan")  # noqa: E731
    grid = [{"threshold": t, **{g: kept(values[g]["similarity"], t) for g in ("evidence top5", "other top5", "cross-agent top1")}}
            for t in THRESHOLDS]
    return {"values": values, "threshold_grid": grid}


def percentiles(xs: list[float]) -> list[float]:
    return [float(v) for v in np.percentile(xs, PERCENTILES)] if xs else [float("nan")] * len(PERCENTILES)


# ---------------------------------------------------------------- output

def print_metrics(metrics: dict[str, dict]) -> None:
    first = next(iter(metrics.values()))
    print(f"\nRetrieval (k=10). Turn recall over the {first['n_evidence_qs']} questions with evidence turns; session hit "
          f"over all {first['n_answer_qs']} questions, and over the {first['n_evidence_qs']} (as the reference counts it).")
    print(f"{'method':<16} | {'turn recall @1/@5/@10':<22} | {'session hit @1/@5/@10':<22} | {'hit, evidence Qs':<18}")
    print("-" * 88)
    for name, m in metrics.items():
        cells = [" / ".join(f"{v:.3f}" for v in m[key]) for key in ("turn_recall", "session_hit", "session_hit_evidence_qs")]
        print(f"{name:<16} | {cells[0]:<22} | {cells[1]:<22} | {cells[2]:<18}")


def print_calibration(cal: dict) -> None:
    for field in ("similarity", "score"):
        print(f"\nHybrid hits: {field} percentiles")
        print(f"{'group':<18} {'n':>5} " + " ".join(f"{'p' + str(p):>6}" for p in PERCENTILES))
        for group, vals in cal["values"].items():
            print(f"{group:<18} {len(vals[field]):>5} " + " ".join(f"{v:6.3f}" for v in percentiles(vals[field])))
    print("\nCosine threshold: fraction of hits with similarity >= t that would be kept")
    print(f"{'t':>5}  {'evidence top5':>14}  {'other top5':>11}  {'cross-agent top1':>17}")
    for row in cal["threshold_grid"]:
        print(f"{row['threshold']:5.2f}  {row['evidence top5']:14.3f}  {row['other top5']:11.3f}  {row['cross-agent top1']:17.3f}")


# ---------------------------------------------------------------- main

async def bench(url: str, questions: list[dict], batch: int) -> dict:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    base = LocalEmbedder("all-MiniLM-L6-v2", 384)
    embedder = TimedEmbedder(base)
    try:
        start = time.perf_counter()
        corpora = []
        for i, q in enumerate(questions, 1):
            corpora.append(await ingest(sessions, embedder, q, batch))
            print(f"  ingested {i}/{len(questions)} ({len(corpora[-1].ids)} passages, {time.perf_counter() - start:.0f}s)", file=sys.stderr)
        ingest_s = time.perf_counter() - start
        n_passages, embed_s = sum(len(c.ids) for c in corpora), sum(embedder.calls_ms) / 1000
        service = await run_service(sessions, embedder, corpora)
        baseline = await run_baseline(base, corpora)
    finally:
        await engine.dispose()
    rankings = {f"service {m}": service["rankings"][m] for m in MODES} | baseline
    lat = service["latency_ms"]
    return {
        "questions": len(corpora),
        "ingest": {"passages": n_passages, "seconds": ingest_s, "passages_per_s": n_passages / ingest_s,
                   "embedding_seconds": embed_s},
        "latency_ms": {"hybrid_p50": float(np.percentile(lat["hybrid"], 50)), "hybrid_p95": float(np.percentile(lat["hybrid"], 95)),
                       "vector_p50": float(np.percentile(lat["vector"], 50)), "text_p50": float(np.percentile(lat["text"], 50)),
                       "query_embedding_p50": float(np.percentile(embedder.calls_ms, 50))},
        "metrics": {name: retrieval_metrics(corpora, r) for name, r in rankings.items()},
        "hnsw_vs_exact_top10_overlap": top10_overlap(service["rankings"]["vector"], baseline["baseline dense"]),
        "calibration": calibration(corpora, service["hybrid"], service["cross"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--batch", type=int, default=128, help="passages per ArchivalMemory.add() call")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    wall = time.perf_counter()
    questions = load_questions(args.data, args.limit)
    server, url = start_database(Path(tempfile.mkdtemp(prefix="engram-bench-")))
    try:
        figures = asyncio.run(bench(url, questions, args.batch))
    finally:
        server.cleanup()
    figures["wall_seconds"] = time.perf_counter() - wall

    ing, lat = figures["ingest"], figures["latency_ms"]
    print(f"\nLongMemEval_S dev slice: {figures['questions']} questions, {ing['passages']} passages")
    print_metrics(figures["metrics"])
    print(f"\nService vector (HNSW) vs exact cosine: mean top-10 overlap {figures['hnsw_vs_exact_top10_overlap']:.3f}")
    print(f"\nIngest: {ing['passages']} passages in {ing['seconds']:.1f}s = {ing['passages_per_s']:.1f} passages/s "
          f"(ArchivalMemory.add in batches of {args.batch}: {ing['embedding_seconds']:.1f}s embedding, "
          f"{ing['seconds'] - ing['embedding_seconds']:.1f}s database)")
    print(f"Search latency (k=10, incl. query embedding p50 {lat['query_embedding_p50']:.1f} ms): hybrid p50 "
          f"{lat['hybrid_p50']:.1f} ms, p95 {lat['hybrid_p95']:.1f} ms; vector p50 {lat['vector_p50']:.1f} ms; "
          f"text p50 {lat['text_p50']:.1f} ms")
    print_calibration(figures["calibration"])
    print(f"\nWall time: {figures['wall_seconds']:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
