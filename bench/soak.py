"""Soak: many one-step turns from several clients, with searches beside them, watching what a long run would leak.

`engram serve` (a real process on a private embedded PostgreSQL, default embedder) and a scripted OpenAI-compatible
LLM on loopback that answers every request at once with `send_message`. --clients clients, each with its own
agent (holding --passages archival passages), loop: one turn (`POST …/chat`, a LoCoMo line as the message), then
one archival search. Every --every seconds the service's /metrics is read — resident memory, open files, asyncio
tasks, pooled connections in use — and its PostgreSQL's client backends are counted.

Printed: one row per tenth of the run (turns/s, turn p50/p95, the gauges at its end), the mean of each turn phase
and of each memory's hybrid search per tenth (where the time grows), and the verdict of issue 18:
after warm-up (the first tenth), RSS within +10 %, connections, open files and tasks flat, and the last minute's
p95 turn latency within +20 % of the first minute after warm-up.

The agents' context window is --context-tokens (4,000 by default, not the service's 32,000): a prompt grows with
every turn until the window is full and eviction starts, and the soak looks for growth beyond that bound. With
4,000 tokens every agent's context is full within the warm-up and eviction (with its summary call) runs every few
turns all through the run; with 32,000 the first ~3,000 turns of 8 clients are a ramp of ever longer prompts.

    python -m bench.soak --turns 20000      # about an hour on 2 cores
"""

import argparse
import asyncio
import os
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import psutil

from bench.retrieval_sets import LOCOMO, locomo
from testkit.scripted_llm import ScriptedLLM, call, tools
from testkit.service_process import start_service, stop_service

GAUGES = {
    "rss_mib": ("process_resident_memory_bytes", 1 / 2**20),
    "open_files": ("process_open_fds", 1),
    "tasks": ("engram_asyncio_tasks", 1),
    "pool_in_use": ("engram_db_connections_in_use", 1),
}


# Histograms (their label -> metric) whose mean per tenth tells where a turn's time grows.
TIMINGS = {"phase": "engram_turn_phase_seconds", "memory": "engram_search_seconds"}


@dataclass
class Sample:
    at: float
    turns: int
    gauges: dict[str, float]
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class Run:
    started: float = field(default_factory=time.monotonic)
    turns: list[tuple[float, float]] = field(default_factory=list)  # (finished at, latency ms)
    searches: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    errors: int = 0


def read_gauges(metrics: str, data_dir: str) -> dict[str, float]:
    values = {}
    for key, (name, scale) in GAUGES.items():
        match = re.search(rf"^{name} (\S+)$", metrics, re.M)
        values[key] = float(match[1]) * scale if match else float("nan")
    values["pg_backends"] = float(_postgres_client_backends(data_dir))
    return values


def read_timings(metrics: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of each turn phase and of each memory's searches, keyed "phase:recollect", "memory:messages"…"""
    timings: dict[str, tuple[float, float]] = {}
    for label, name in TIMINGS.items():
        sums = dict(re.findall(rf'^{name}_sum{{{label}="([^"]+)"}} (\S+)$', metrics, re.M))
        counts = dict(re.findall(rf'^{name}_count{{{label}="([^"]+)"}} (\S+)$', metrics, re.M))
        timings |= {f"{label}:{value}": (float(sums[value]), float(counts[value])) for value in sums if value in counts}
    return timings


def _postgres_client_backends(data_dir: str) -> int:
    count = 0
    for process in psutil.process_iter(["cmdline"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
        except psutil.Error:
            continue
        if cmdline.startswith("postgres: ") and "[local]" in cmdline:
            count += 1
    return count


async def client_loop(base: str, agent_id: str, messages: list[str], run: Run, budget: list[int]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        i = 0
        while budget[0] > 0:
            budget[0] -= 1
            message = messages[i % len(messages)]
            i += 1
            started = time.perf_counter()
            response = await client.post(f"/v1/agents/{agent_id}/chat", json={"message": message})
            finished = time.perf_counter()
            if response.status_code != 200:
                run.errors += 1
                continue
            run.turns.append((time.monotonic(), (finished - started) * 1000))
            started = time.perf_counter()
            found = await client.get(f"/v1/agents/{agent_id}/archival", params={"query": message, "limit": 5})
            run.errors += found.status_code != 200
            run.searches.append((time.perf_counter() - started) * 1000)


async def sampler(base: str, data_dir: str, run: Run, every: float, done: asyncio.Event) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while True:
            metrics = (await client.get("/metrics")).text
            run.samples.append(Sample(time.monotonic(), len(run.turns), read_gauges(metrics, data_dir), read_timings(metrics)))
            try:
                await asyncio.wait_for(done.wait(), every)
                return
            except TimeoutError:
                pass


async def soak(base: str, data_dir: str, args: argparse.Namespace) -> Run:
    conversations = locomo(LOCOMO).corpora
    lines = [p for c in conversations for p in c.passages]
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        agents = []
        for n in range(args.clients):
            agent = (await client.post("/v1/agents", json={"name": f"soak {n}"})).json()
            corpus = conversations[n % len(conversations)].passages
            for start in range(0, args.passages, 50):
                items = [{"content": p} for p in corpus[start : min(start + 50, args.passages)]]
                assert (await client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": items})).status_code == 201
            agents.append(agent["id"])
    run, budget, done = Run(), [args.turns], asyncio.Event()
    watcher = asyncio.create_task(sampler(base, data_dir, run, args.every, done))
    await asyncio.gather(*(client_loop(base, a, lines[n * 97 :] + lines[: n * 97], run, budget) for n, a in enumerate(agents)))
    await asyncio.sleep(args.every)  # the last vectors settle before the last sample
    done.set()
    await watcher
    return run


def report(run: Run, args: argparse.Namespace) -> None:
    end = run.turns[-1][0]
    duration = end - run.started
    print(
        f"{len(run.turns)} turns from {args.clients} clients in {duration / 60:.1f} min ({len(run.turns) / duration:.2f} turns/s), "
        f"{len(run.searches)} searches (p50 {statistics.median(run.searches):.1f} ms), {run.errors} errors; "
        f"{psutil.cpu_count()} CPUs"
    )
    print(
        f"{'slice':>5} | {'turns':>6} | {'turns/s':>7} | {'p50 ms':>7} | {'p95 ms':>7} | "
        + " | ".join(f"{k:>11}" for k in [*GAUGES, "pg_backends"])
    )
    slices = 10
    edges = np.linspace(run.started, end, slices + 1)
    for i in range(slices):
        lat = [ms for at, ms in run.turns if edges[i] <= at <= edges[i + 1]]
        sample = min(run.samples, key=lambda s: abs(s.at - edges[i + 1]))
        gauges = " | ".join(f"{sample.gauges[k]:>11.1f}" for k in [*GAUGES, "pg_backends"])
        print(
            f"{i + 1:>5} | {len(lat):>6} | {len(lat) / (edges[i + 1] - edges[i]):>7.2f} | {np.percentile(lat, 50):>7.1f} | "
            f"{np.percentile(lat, 95):>7.1f} | {gauges}"
        )
    timing_table(run, edges)
    warm = edges[1]
    after_warmup = [s for s in run.samples if s.at >= warm]
    first, last = after_warmup[0].gauges, run.samples[-1].gauges
    first_minute = [ms for at, ms in run.turns if warm <= at <= warm + 60]
    last_minute = [ms for at, ms in run.turns if at >= end - 60]
    p95_first, p95_last = np.percentile(first_minute, 95), np.percentile(last_minute, 95)
    peak = {k: max(s.gauges[k] for s in after_warmup) for k in last}
    print("\nafter warm-up (first tenth) → end (peak in between):")
    for key in last:
        print(
            f"  {key:12} {first[key]:9.1f} → {last[key]:9.1f} ({(last[key] / first[key] - 1) * 100 if first[key] else 0:+.1f} %, peak {peak[key]:.1f})"
        )
    print(
        f"  p95 turn     {p95_first:9.1f} → {p95_last:9.1f} ms ({(p95_last / p95_first - 1) * 100:+.1f} %): first minute after warm-up → last minute"
    )
    verdict = {
        "RSS within +10 %": last["rss_mib"] <= first["rss_mib"] * 1.10,
        "p95 within +20 %": p95_last <= p95_first * 1.20,
        "open files flat": last["open_files"] <= first["open_files"] + 2,
        "tasks flat": last["tasks"] <= first["tasks"] + 2,
        "pooled connections flat": last["pool_in_use"] <= first["pool_in_use"] + 1,
        "PostgreSQL backends flat": last["pg_backends"] <= first["pg_backends"] + 2,
    }
    print("  " + "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in verdict.items()))


def timing_table(run: Run, edges: np.ndarray) -> None:
    """Mean ms of each turn phase and of each memory's hybrid search, per tenth: where a turn's time grows."""
    at_edges = [min(run.samples, key=lambda s: abs(s.at - edge)) for edge in edges]
    keys = sorted({k for s in at_edges for k in s.timings})
    print("\nmean ms per tenth: turn phases and hybrid searches (from /metrics)")
    print(f"{'slice':>5} | " + " | ".join(f"{k.split(':')[1][:11]:>11}" for k in keys))
    for i in range(len(edges) - 1):
        before, after = at_edges[i].timings, at_edges[i + 1].timings
        means = []
        for key in keys:
            (seconds_before, count_before), (seconds, count) = before.get(key, (0.0, 0.0)), after.get(key, (0.0, 0.0))
            spent, done = seconds - seconds_before, count - count_before
            means.append(f"{spent / done * 1000 if done else float('nan'):>11.1f}")
        print(f"{i + 1:>5} | " + " | ".join(means))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--passages", type=int, default=100, help="archival passages per agent")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--context-tokens", type=int, default=4000, help="the agents' context window (see above)")
    args = parser.parse_args()
    llm = ScriptedLLM().start()
    llm.reset(fallback=tools(call("send_message", text="Noted.")))
    llm.requests = _Forgetful()
    try:
        with tempfile.TemporaryDirectory(prefix="engram-soak-") as data_dir:
            env = {
                "ENGRAM_DATA_DIR": data_dir,
                "ENGRAM_CONTEXT_WINDOW_TOKENS": str(args.context_tokens),
                "OPENAI_BASE_URL": llm.url,
                "OPENAI_API_KEY": "bench",
                "ENGRAM_LLM_MODEL": "scripted",
                "PATH": os.environ["PATH"],
            }
            process, base = start_service(env)
            try:
                run = asyncio.run(soak(base, data_dir, args))
            finally:
                stop_service(process)
        report(run, args)
    finally:
        llm.stop()


class _Forgetful(list[dict[str, Any]]):
    """The scripted LLM's request log, kept empty: a soak would otherwise hold every request in this process."""

    def append(self, _: object) -> None:
        pass


if __name__ == "__main__":
    main()
