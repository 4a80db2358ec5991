"""Archival search over HTTP against its physical limit, measured in the same run on the same rows.

Store (--set): the LongMemEval_S dev slice, one agent per question and its question (28 agents, 13,869 passages;
long questions), or LoCoMo dev, one agent per conversation (5 agents, 2,760 one-line turns) and six of its
questions each (short questions, the kind a chat product sends), with its 1,210 facts citing their turns beside them
(locomo-facts); ingested through ArchivalMemory.add() with
vectors from --cache (see bench/retrieval.py; the first run embeds them all).
1. Engram: `GET /v1/agents/{id}/archival?query=…&k=10` (hybrid) on `engram serve`, a real process on the same
   database with the default embedder — query embedding included. Sequential p50/p95 over every question x
   --repeats, then searches/s with 8 concurrent clients; first, one passage is stored in each agent through the
   API, as in any service in use.
2. Physical limit: in this process, the same embedder (`embed_query`) plus one raw pgvector query over asyncpg,
   `SELECT id … WHERE agent_id = $1 ORDER BY embedding <=> $2 LIMIT 10` — sequential p50/p95 and 8 concurrent
   clients. The two sides run one after the other, never at once.
3. Recollection: `POST /v1/agents/{id}/recollection` (default budget, core memory included) beside the same search,
   each question's two requests back to back, sequential p50/p95 of both.
Printed: the figures and the ratios Engram / limit, and the sequential p50 of an empty request to the service over
the same client (`GET /healthz`: HTTP, uvicorn and the middleware, nothing else). Then where Engram's time goes:
sequential p50 of the query embedding alone, the raw query alone and the service's search given the vector (its
statement as the service sends it, rows and all; same rows, same connection settings), and EXPLAIN ANALYZE of both
statements for one question.

    python -m bench.http_search --cache ~/.cache/engram-bench-all [--set locomo]   # ~5 minutes, cache warm
"""

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import numpy as np
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app import db
from app.llm.embeddings import Embedder
from app.llm.embeddings.providers import E5Embedder
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.search.query import SearchQuery
from app.settings import available_cpus
from bench.embedding_cache import CachedEmbedder
from bench.explain import explain, explain_sent
from bench.retrieval import Stored, ingest, start_database
from bench.retrieval_sets import Corpus, locomo, longmemeval
from testkit.service_process import running_service

CONCURRENCY = 8
QUESTIONS_PER_CONVERSATION = 6  # LoCoMo: spread over each conversation's questions
# Stored through the service before its searches are timed, as any service in use has: its embedder's passage
# work has run (until 2026-12-05 that slowed every later query embedding 2x; bench/ARCHIVE.md, "The model's threads").
IN_USE_PASSAGE = "User: I moved to Lisbon last spring and I still take the tram to work every morning."
RAW_SQL = "SELECT id FROM archival_passages WHERE agent_id = $1 ORDER BY embedding <=> $2::vector LIMIT 10"
RAW_SQL_NAMED = RAW_SQL.replace("$1", ":agent_id").replace("$2::vector", "CAST(:embedding AS vector)")


async def load(url: str, corpora: list[Corpus], embedder: E5Embedder, cache: Path) -> list[tuple[str, str]]:
    """(agent id, question) per question, the store filled."""
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    cached = CachedEmbedder(embedder, cache)
    searches = []
    try:
        for corpus in corpora:
            stored = await ingest(sessions, cached, corpus, 128)
            await store_facts(sessions, cached, stored)
            searches += [(str(stored.agent_id), question) for question in _questions(corpus)]
        cached.save()
    finally:
        await engine.dispose()
    return searches


async def store_facts(sessions: async_sessionmaker[AsyncSession], embedder: Embedder, stored: Stored) -> None:
    """The corpus' facts (--set locomo-facts), citing the passages of the turns they name."""
    passage_of = {turn: stored.passage_ids[i] for i, turns in enumerate(stored.turns) for turn in turns}
    async with db.transaction(sessions) as session:
        facts = [
            NewPassage(content=f.text, occurred_at=f.date, sources=[passage_of[t] for t in sorted(f.sources)])
            for f in stored.corpus.facts
        ]
        for start in range(0, len(facts), 128):
            await ArchivalMemory(session, embedder).add(stored.agent_id, facts[start : start + 128])


def _questions(corpus: Corpus) -> list[str]:
    """LongMemEval: the corpus's one question; LoCoMo: QUESTIONS_PER_CONVERSATION of them, evenly spread."""
    step = max(len(corpus.questions) // QUESTIONS_PER_CONVERSATION, 1)
    return [q.text for q in corpus.questions[::step][:QUESTIONS_PER_CONVERSATION]]


def percentiles(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), float(np.percentile(values, 95))


async def timed(calls: Sequence[Callable[[], Awaitable[None]]], concurrency: int) -> tuple[list[float], float]:
    """Latency of each call (ms) and calls per second, with `concurrency` callers."""
    latencies: list[float] = []
    pending = list(calls)

    async def worker() -> None:
        while pending:
            call = pending.pop()
            started = time.perf_counter()
            await call()
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, len(calls) / (time.perf_counter() - started)


async def engram_side(base: str, searches: list[tuple[str, str]], repeats: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:

        def call(agent_id: str, question: str) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                response = await client.get(f"/v1/agents/{agent_id}/archival", params={"query": question, "k": 10})
                assert response.status_code == 200 and response.json()["items"], response.text

            return run

        for agent_id in {a for a, _ in searches}:  # as in use: the service has embedded memories of its own
            stored = await client.post(f"/v1/agents/{agent_id}/archival", json={"content": IN_USE_PASSAGE})
            assert stored.status_code == 201, stored.text
        calls = [call(a, q) for a, q in searches]
        # Warm-up, on both sides: every question once. Engram builds, prepares and plans its statement once per
        # shape (the number of query terms, named dates, speakers) on a connection, as a service in use long has;
        # five warm-up searches left the first timed round cold (2026-12-05: p50 ~32 ms against ~25 after it).
        await timed(calls, 1)
        sequential, _ = await timed(calls * repeats, 1)
        _, rate = await timed(calls * repeats, CONCURRENCY)

        async def empty() -> None:
            assert (await client.get("/healthz")).status_code == 200

        empty_requests, _ = await timed([empty] * len(calls) * repeats, 1)
        # Recollection (POST …/recollection, default budget, core memory included) against the same search, each
        # question's two requests back to back so that both meet the same state of the machine.
        recollections: list[float] = []
        searches_beside: list[float] = []
        for agent_id, question in searches * repeats:
            for path, into in (("recollection", recollections), ("archival", searches_beside)):
                started = time.perf_counter()
                if path == "recollection":
                    response = await client.post(f"/v1/agents/{agent_id}/recollection", json={"query": question})
                else:
                    response = await client.get(f"/v1/agents/{agent_id}/archival", params={"query": question, "k": 10})
                into.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, response.text
    return {
        "sequential": sequential,
        "rate": rate,
        "empty": empty_requests,
        "recollection": recollections,
        "search beside": searches_beside,
    }


async def raw_side(url: str, embedder: E5Embedder, searches: list[tuple[str, str]], repeats: int) -> dict[str, Any]:
    pool = await asyncpg.create_pool(
        url.replace("postgresql+asyncpg://", "postgresql://", 1),
        min_size=CONCURRENCY,
        max_size=CONCURRENCY,
        server_settings=db.SESSION_SETTINGS,  # the service's (iterative HNSW scans): same rows come back
    )

    def call(agent_id: str, question: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            vector = await embedder.embed_query(question)
            async with pool.acquire() as conn:
                rows = await conn.fetch(RAW_SQL, agent_id, str(vector))
            assert rows

        return run

    try:
        calls = [call(a, q) for a, q in searches]
        await timed(calls, 1)  # warm-up, as Engram's
        sequential, _ = await timed(calls * repeats, 1)
        _, rate = await timed(calls * repeats, CONCURRENCY)
    finally:
        await pool.close()
    return {"sequential": sequential, "rate": rate}


async def breakdown(url: str, embedder: E5Embedder, searches: list[tuple[str, str]]) -> list[str]:
    """Sequential p50 of each part on its own — the query embedding, the raw query, and the service's search given
    the vector (`ArchivalMemory.search`: its statement as the service builds and sends it, with the rows back) — and
    both statements explained for the first question (the service's as it reached the driver)."""
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    by_agent = [(uuid.UUID(a), q) for a, q in searches]
    vectors = [await embedder.embed_query(q) for _, q in by_agent]
    embed_ms: list[float] = []
    raw_ms: list[float] = []
    search_ms: list[float] = []
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        sent.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        for (agent_id, question), vector in zip(by_agent, vectors, strict=True):
            started = time.perf_counter()
            await embedder.embed_query(question)
            embed_ms.append((time.perf_counter() - started) * 1000)
            async with sessions() as session:
                conn = await session.connection()
                started = time.perf_counter()
                (await conn.execute(text(RAW_SQL_NAMED), {"agent_id": agent_id, "embedding": str(vector)})).all()
                raw_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await ArchivalMemory(session, embedder).search(agent_id, SearchQuery(question, k=10), vector=vector)
                search_ms.append((time.perf_counter() - started) * 1000)
        (agent_id, question), vector = by_agent[0], vectors[0]
        async with sessions() as session:
            sent.clear()
            await ArchivalMemory(session, embedder).search(agent_id, SearchQuery(question, k=10), vector=vector)
            [(statement, parameters)] = sent
            plans = [
                "raw pgvector query: " + await explain(session, RAW_SQL_NAMED, {"agent_id": agent_id, "embedding": str(vector)}),
                "Engram's search statement: " + await explain_sent(session, statement, parameters),
            ]
    finally:
        await engine.dispose()
    return [
        f"parts alone, sequential p50: query embedding {statistics.median(embed_ms):.1f} ms, raw pgvector query "
        f"{statistics.median(raw_ms):.1f} ms, Engram's search given the vector {statistics.median(search_ms):.1f} ms",
        *plans,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=("longmemeval", "locomo", "locomo-facts"), default="longmemeval")
    parser.add_argument("--cache", type=Path, required=True, help="the embedding cache of bench/retrieval.py")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    threads = available_cpus()
    embedder = E5Embedder(threads)
    corpora = (longmemeval() if args.set == "longmemeval" else locomo(facts=args.set == "locomo-facts")).corpora
    root = Path(tempfile.mkdtemp(prefix="engram-http-search-"))
    server, url = start_database(root, embedder.dim)
    try:
        searches = asyncio.run(load(url, corpora, embedder, args.cache))
        raw = asyncio.run(raw_side(url, embedder, searches, args.repeats))
        parts = asyncio.run(breakdown(url, embedder, searches))
        env = {"DATABASE_URL": url, "ENGRAM_EMBEDDING_THREADS": str(threads), "PATH": os.environ["PATH"]}
        with running_service(env) as base:
            served = asyncio.run(engram_side(base, searches, args.repeats))
    finally:
        server.cleanup()
    e50, e95 = percentiles(served["sequential"])
    r50, r95 = percentiles(raw["sequential"])
    print(
        f"{args.set}: {len(corpora)} agents, {len(searches)} questions, {len(served['sequential'])} searches per side, "
        f"k=10, embedder threads {threads}"
    )
    print(f"{'':32} | {'p50 ms':>7} | {'p95 ms':>7} | searches/s x{CONCURRENCY}")
    print(f"{'Engram over HTTP (hybrid)':32} | {e50:7.1f} | {e95:7.1f} | {served['rate']:8.1f}")
    print(f"{'limit: embed + raw pgvector':32} | {r50:7.1f} | {r95:7.1f} | {raw['rate']:8.1f}")
    print(f"{'ratio Engram / limit':32} | {e50 / r50:7.2f} | {e95 / r95:7.2f} | {served['rate'] / raw['rate']:8.2f}")
    c50, c95 = percentiles(served["recollection"])
    s50, s95 = percentiles(served["search beside"])
    print(f"{'Engram recollection (1,500 ch.)':32} | {c50:7.1f} | {c95:7.1f} |   (searches beside it: {s50:.1f} / {s95:.1f} ms)")
    print(f"{'recollection less search':32} | {c50 - s50:+7.1f} | {c95 - s95:+7.1f} |")
    print(f"\nan empty request over the same client (GET /healthz), sequential p50 {statistics.median(served['empty']):.1f} ms")
    print("\n".join(parts))


if __name__ == "__main__":
    main()
