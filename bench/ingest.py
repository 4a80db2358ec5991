"""Ingest and query-embedding throughput of the default embedder: the raw embedder against `engram serve` over
HTTP, on the same texts, in the same run.

1. Raw: `E5Embedder` in this process embeds the texts as passages (batches of --batch) — the physical limit.
2. Service: `engram serve` (a real process on a private embedded PostgreSQL) receives the same texts through
   `POST /v1/agents/{id}/archival/batch`, one request per batch; meanwhile one probe asks `GET /healthz` every
   50 ms (a blocked event loop would show there) and another searches the same agent every 500 ms (a search that
   waited for whole batches would show there).
3. Query embedding: `embed_query` on the LongMemEval questions, p50/p95.

Texts: the first --texts turns of the LongMemEval_S dev slice ("role: content", first 2,000 characters, as in
bench/retrieval.py). Run from the repository root in the virtualenv:

    python -m bench.ingest                 # 512 texts, batches of 32 (about 5 minutes on 2 cores)
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from app.llm.embeddings.providers import E5Embedder
from app.settings import available_cpus
from bench.retrieval_sets import LONGMEMEVAL, longmemeval
from testkit.service_process import running_service


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


async def service_rate(base: str, texts: list[str], batch: int, query: str) -> tuple[float, list[float], list[float]]:
    """Passages/s through the API, and the /healthz and search latencies seen meanwhile."""
    probes: list[float] = []
    searches: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        agent = (await client.post("/v1/agents", json={"name": "ingest bench"})).json()
        await client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "warm-up"})
        done = asyncio.Event()

        async def probe(path: str, params: dict, every: float, out: list[float]) -> None:
            while not done.is_set():
                start = time.perf_counter()
                assert (await client.get(path, params=params)).status_code == 200
                out.append((time.perf_counter() - start) * 1000)
                await asyncio.sleep(every)

        probers = [
            asyncio.create_task(probe("/healthz", {}, 0.05, probes)),
            asyncio.create_task(probe(f"/v1/agents/{agent['id']}/archival", {"query": query, "k": 10}, 0.5, searches)),
        ]
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            response = await client.post(
                f"/v1/agents/{agent['id']}/archival/batch", json={"items": [{"content": t} for t in texts[i : i + batch]]}
            )
            assert response.status_code in (200, 201), response.text
        elapsed = time.perf_counter() - start
        done.set()
        await asyncio.gather(*probers)
    return len(texts) / elapsed, probes, searches


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
            served, probes, searches = asyncio.run(service_rate(base, texts, args.batch, questions[0]))
    raw_again = asyncio.run(raw_rate(embedder, texts[: len(texts) // 4], args.batch))  # drift check

    chars = statistics.mean(len(t) for t in texts)
    figures = {
        "texts": len(texts),
        "mean_chars": chars,
        "batch": args.batch,
        "threads": threads,
        "raw_passages_per_s": raw,
        "raw_passages_per_s_after": raw_again,
        "service_passages_per_s": served,
        "ratio": served / raw,
        "query_embedding_ms": {"p50": float(np.percentile(query_ms, 50)), "p95": float(np.percentile(query_ms, 95))},
        "healthz_during_ingest_ms": {
            "p50": float(np.percentile(probes, 50)),
            "p99": float(np.percentile(probes, 99)),
            "max": max(probes),
            "n": len(probes),
        },
        "search_during_ingest_ms": {"p50": float(np.percentile(searches, 50)), "max": max(searches), "n": len(searches)},
    }
    print(f"{len(texts)} LongMemEval turns (mean {chars:.0f} chars), batches of {args.batch}, embedder threads {threads}")
    print(
        f"raw embedder (E5Embedder.embed_passages, in process): {raw:6.1f} passages/s (again after the service run: {raw_again:.1f})"
    )
    print(f"engram serve, POST /archival/batch over HTTP:          {served:6.1f} passages/s = {served / raw:.2f} x raw")
    q = figures["query_embedding_ms"]
    print(f"query embedding (embed_query, {len(query_ms)} calls): p50 {q['p50']:.1f} ms, p95 {q['p95']:.1f} ms")
    h = figures["healthz_during_ingest_ms"]
    print(f"GET /healthz while ingesting ({h['n']} probes): p50 {h['p50']:.1f} ms, p99 {h['p99']:.1f} ms, max {h['max']:.1f} ms")
    s = figures["search_during_ingest_ms"]
    print(f"search (k=10) while ingesting ({s['n']} probes): p50 {s['p50']:.1f} ms, max {s['max']:.1f} ms")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
