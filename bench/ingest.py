"""Ingest and query-embedding throughput of the default embedder: the raw embedder against `engram serve` over
HTTP, on the same texts, in the same run.

1. Raw: `E5Embedder` in this process embeds the texts as passages (batches of --batch) — the physical limit.
2. Service: `engram serve` (a real process on a private embedded PostgreSQL) receives the same texts as one
   import job (`POST /v1/agents/{id}/archival/import`, JSON lines), watched until done; meanwhile one probe asks
   `GET /healthz` every 50 ms (a blocked event loop would show there) and another searches another agent (loaded
   first with a quarter of the texts) every 250 ms, against the same searches before the import, idle (issue 22:
   search p95 while importing <= 3x idle, the import >= 0.8x the raw embedder).
3. Query embedding: `embed_query` on the LongMemEval questions, p50/p95.

Texts: the first --texts turns of the LongMemEval_S dev slice ("role: content", first 2,000 characters, as in
bench/retrieval.py). Run from the repository root in the virtualenv:

    python -m bench.ingest                 # 512 texts (about 5 minutes on 2 cores)
"""

import argparse
import asyncio
import itertools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.llm.embeddings.providers import E5Embedder
from app.settings import available_cpus
from bench.retrieval_sets import LONGMEMEVAL, longmemeval
from testkit.bulk import import_passages_async
from testkit.service_process import running_service

IDLE_SEARCHES = 40


def texts_of(path: Path, n: int) -> tuple[list[str], list[str]]:
    corpora = longmemeval(path).corpora
    texts = [p for c in corpora for p in c.passages]
    return texts[:n], [c.questions[0].text for c in corpora]


async def raw_rate(embedder: E5Embedder, texts: list[str], batch: int) -> float:
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        await embedder.embed_passages(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - start)


async def query_latencies(embedder: E5Embedder, questions: list[str], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        for q in questions:
            start = time.perf_counter()
            await embedder.embed_query(q)
            out.append((time.perf_counter() - start) * 1000)
    return out


async def service_rate(base: str, texts: list[str], questions: list[str]) -> dict[str, Any]:
    """Passages/s of an import job over HTTP, and the /healthz and search latencies seen meanwhile; the same
    searches before it, idle. The searches go to another agent, loaded first, so that only the import's load
    differs between idle and busy."""
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        searched = (await client.post("/v1/agents", json={"name": "searched"})).json()["id"]
        await import_passages_async(client, searched, texts[: len(texts) // 4])
        target = (await client.post("/v1/agents", json={"name": "ingest bench"})).json()["id"]
        queries = itertools.cycle(questions)

        async def search() -> float:
            start = time.perf_counter()
            response = await client.get(f"/v1/agents/{searched}/archival", params={"query": next(queries), "k": 10})
            assert response.status_code == 200, response.text
            return (time.perf_counter() - start) * 1000

        idle = [await search() for _ in range(IDLE_SEARCHES)]
        probes: list[float] = []
        searches: list[float] = []
        done = asyncio.Event()

        async def probe(measure: Callable[[], Awaitable[float]], every: float, out: list[float]) -> None:
            while not done.is_set():
                out.append(await measure())
                await asyncio.sleep(every)

        async def healthz() -> float:
            start = time.perf_counter()
            assert (await client.get("/healthz")).status_code == 200
            return (time.perf_counter() - start) * 1000

        probers = [asyncio.create_task(probe(healthz, 0.05, probes)), asyncio.create_task(probe(search, 0.25, searches))]
        start = time.perf_counter()
        job = await import_passages_async(client, target, texts)
        elapsed = time.perf_counter() - start
        done.set()
        await asyncio.gather(*probers)
    assert job["done"] == len(texts), job
    return {"rate": len(texts) / elapsed, "healthz": probes, "searches": searches, "idle": idle}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=LONGMEMEVAL)
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    texts, questions = texts_of(args.data, args.texts)
    threads = available_cpus()
    embedder = E5Embedder(threads)

    query_ms = asyncio.run(query_latencies(embedder, questions, repeats=3))
    raw = asyncio.run(raw_rate(embedder, texts, args.batch))
    with tempfile.TemporaryDirectory(prefix="engram-ingest-") as data_dir:
        env = {"ENGRAM_DATA_DIR": data_dir, "DATABASE_URL": "", "ENGRAM_EMBEDDING_THREADS": str(threads)}
        with running_service({k: v for k, v in env.items() if v} | {"PATH": os.environ["PATH"]}) as base:
            served = asyncio.run(service_rate(base, texts, questions))
    raw_again = asyncio.run(raw_rate(embedder, texts[: len(texts) // 4], args.batch))  # drift check

    def percentiles(values: list[float]) -> dict[str, float]:
        return {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95)), "n": len(values)}

    chars = statistics.mean(len(t) for t in texts)
    figures = {
        "texts": len(texts),
        "mean_chars": chars,
        "batch": args.batch,
        "threads": threads,
        "raw_passages_per_s": raw,
        "raw_passages_per_s_after": raw_again,
        "service_passages_per_s": served["rate"],
        "ratio": served["rate"] / raw,
        "query_embedding_ms": percentiles(query_ms),
        "healthz_during_import_ms": percentiles(served["healthz"]) | {"max": max(served["healthz"])},
        "search_idle_ms": percentiles(served["idle"]),
        "search_during_import_ms": percentiles(served["searches"]) | {"max": max(served["searches"])},
    }
    print(f"{len(texts)} LongMemEval turns (mean {chars:.0f} chars), embedder threads {threads}")
    print(
        f"raw embedder (E5Embedder.embed_passages, in process, batches of {args.batch}): {raw:6.1f} passages/s "
        f"(again after the service run: {raw_again:.1f})"
    )
    print(f"engram serve, an import job over HTTP: {served['rate']:6.1f} passages/s = {served['rate'] / raw:.2f} x raw")
    q = figures["query_embedding_ms"]
    print(f"query embedding (embed_query, {q['n']} calls): p50 {q['p50']:.1f} ms, p95 {q['p95']:.1f} ms")
    h = figures["healthz_during_import_ms"]
    print(f"GET /healthz while importing ({h['n']} probes): p50 {h['p50']:.1f} ms, p95 {h['p95']:.1f} ms, max {h['max']:.1f} ms")
    idle, busy = figures["search_idle_ms"], figures["search_during_import_ms"]
    print(
        f"search (k=10, another agent): idle p50 {idle['p50']:.1f} / p95 {idle['p95']:.1f} ms; while importing "
        f"p50 {busy['p50']:.1f} / p95 {busy['p95']:.1f} ms ({busy['n']} probes) = {busy['p95'] / idle['p95']:.2f} x idle p95"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
