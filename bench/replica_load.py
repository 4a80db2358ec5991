"""Searches beside writes, with and without a streaming read replica: the replica's share of the searches.

The store: LoCoMo dev, one agent per conversation (5 agents, 2,760 one-line turns, vectors from --cache), in an
embedded PostgreSQL of its own; the standby is made from it with `pg_basebackup -R` (testkit/standby.py) and runs on
the same machine. `engram serve` runs as a real process twice: on the primary alone, then with
ENGRAM_DATABASE_REPLICA_URLS naming the standby. Each time, for --seconds: --searchers clients search the five agents
(`GET …/archival?query=` with LoCoMo's questions) while --writers clients store passages in a sixth agent
(`POST …/archival`), all as one caller (no API keys), so read-your-writes keeps only that agent's reads on the primary.
Printed, per run: searches and writes per second, search p50/p95, and where the searches read
(`engram_db_reads_total`). Everything shares the machine's cores: the figures say where the reads go, not what a
replica on its own machine adds.

    python -m bench.replica_load --cache ~/.cache/engram-bench-all    # ~2 minutes, cache warm
"""

import argparse
import asyncio
import itertools
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.llm.embeddings.providers import E5Embedder
from app.settings import available_cpus
from bench.http_search import load
from bench.retrieval import start_database
from bench.retrieval_sets import locomo
from testkit.service_process import running_service
from testkit.standby import Standby


def reads(client: httpx.Client) -> dict[str, float]:
    found = re.findall(r'^engram_db_reads_total\{target="(\w+)"\} (\S+)$', client.get("/metrics").text, re.MULTILINE)
    return {target: float(count) for target, count in found}


async def mixed_load(base: str, searches: list[tuple[str, str]], args: argparse.Namespace) -> dict[str, Any]:
    latencies: list[float] = []
    writes = 0
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        writer_agent = (await client.post("/v1/agents", json={"name": f"writer {time.time_ns()}"})).json()["id"]
        await asyncio.sleep(2.0)  # past read-your-writes of the agent creation, which covers all of the caller's reads
        questions = itertools.cycle(searches)
        deadline = time.monotonic() + args.seconds

        async def search() -> None:
            while time.monotonic() < deadline:
                agent_id, question = next(questions)
                started = time.perf_counter()
                response = await client.get(f"/v1/agents/{agent_id}/archival", params={"query": question, "k": 10})
                response.raise_for_status()
                latencies.append((time.perf_counter() - started) * 1000)

        async def write() -> None:
            nonlocal writes
            while time.monotonic() < deadline:
                text = f"The user mentioned errand number {time.time_ns()} today."
                response = await client.post(f"/v1/agents/{writer_agent}/archival", json={"content": text})
                response.raise_for_status()
                writes += 1

        started = time.monotonic()
        await asyncio.gather(*(search() for _ in range(args.searchers)), *(write() for _ in range(args.writers)))
        elapsed = time.monotonic() - started
    return {"latencies": latencies, "searches/s": len(latencies) / elapsed, "writes/s": writes / elapsed}


def run(base: str, searches: list[tuple[str, str]], args: argparse.Namespace) -> dict[str, Any]:
    with httpx.Client(base_url=base) as client:
        before = reads(client)
        result = asyncio.run(mixed_load(base, searches, args))
        after = reads(client)
    result["reads"] = {t: int(after.get(t, 0.0) - before.get(t, 0.0)) for t in ("primary", "replica")}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="the embedding cache of bench/retrieval.py")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--searchers", type=int, default=6)
    parser.add_argument("--writers", type=int, default=2)
    args = parser.parse_args()
    threads = available_cpus()
    embedder = E5Embedder(threads)
    root = Path(tempfile.mkdtemp(prefix="engram-replica-load-"))
    server, url = start_database(root, embedder.dim)
    standby = None
    results = {}
    try:
        searches = asyncio.run(load(url, locomo().corpora, embedder, args.cache))
        standby = Standby(str(Path(server.pgdata)), root / "standby").create()
        env = {"DATABASE_URL": url, "ENGRAM_EMBEDDING_THREADS": str(threads), "PATH": os.environ["PATH"]}
        with running_service(env) as base:
            results["primary alone"] = run(base, searches, args)
        replicated = {**env, "ENGRAM_DATABASE_REPLICA_URLS": standby.url("engram_bench")}
        with running_service(replicated) as base:
            results["with the standby"] = run(base, searches, args)
    finally:
        if standby is not None:
            standby.stop("immediate")
        server.cleanup()
    print(
        f"{args.searchers} searching clients, {args.writers} writing, {args.seconds:g} s, {len(searches)} questions, cpus {threads}"
    )
    print(f"{'':18} | {'searches/s':>10} | {'p50 ms':>7} | {'p95 ms':>7} | {'writes/s':>8} | searches on the standby")
    for name, result in results.items():
        p50, p95 = statistics.median(result["latencies"]), float(np.percentile(result["latencies"], 95))
        served = result["reads"]
        share = served["replica"] / max(served["replica"] + served["primary"], 1)
        print(
            f"{name:18} | {result['searches/s']:10.1f} | {p50:7.1f} | {p95:7.1f} | {result['writes/s']:8.1f} | "
            f"{share:.3f} ({served['replica']} of {served['replica'] + served['primary']})"
        )


if __name__ == "__main__":
    main()
