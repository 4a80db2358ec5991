"""Per-turn overhead: what a one-step turn costs beyond the LLM's own round trip, and where that time goes.

`engram serve` (a real process on a private embedded PostgreSQL, default embedder) talks to a scripted
OpenAI-compatible LLM on loopback that answers every request at once with a `send_message` call. The agent holds
--passages archival passages (LongMemEval turns) so that automatic recollection searches a real store.
Measured in one run:
1. Turn: `POST /v1/agents/{id}/chat` over HTTP, --turns turns after 5 warm-up turns (LongMemEval questions as
   messages), p50/p95.
2. LLM round trip: the service's own last request to the LLM, sent again from here through the `openai` client,
   --turns times, p50 — the physical limit of a one-step turn; and the service's own LLM calls (its `llm` phase).
   Our own time is the turn less the smaller of the two. Both post the request as plain JSON: the SDK's
   `chat.completions.create()` first walks it through its TypedDict transform (~27 ms for this 12 kB request).
3. Where the time goes: the service's `engram_turn_phase_seconds` and lock-wait histograms (means over the
   measured turns, from /metrics before and after).
4. The query embedding alone, once the service has stopped: the raw embedder in this process on the same messages,
   with the idle the turns had outside the service between them (--llm-seconds + --pause; the turns also had the
   rest of each turn between their embeddings) — the model's share of our own time. On a machine that idles between
   turns the model's OpenMP workers fall asleep and must be woken: a short question took 16.4–16.6 ms after 0.45 s
   idle against 10.3–12.4 back to back (12.5 and 12.0 with OMP_WAIT_POLICY=active, which keeps them spinning, and a
   core busy, for ever), bench/ARCHIVE.md.

    python -m bench.turn                    # about 3 minutes on 2 cores (most of it embedding the passages)
    python -m bench.turn --set locomo       # short messages (LoCoMo dev questions, median 52 characters, against
                                            # LongMemEval's 71): the query embedding costs ~1 ms per token
    python -m bench.turn --llm-seconds 0.3  # an LLM that takes as long as a fast hosted one: what the turn does
                                            # meanwhile (the message vectors) is off the critical path
    python -m bench.turn --pause 0.15       # a user who reads the reply before writing: the next turn no longer
                                            # meets the last one's background work (its message vectors)
"""

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from app.llm.embeddings.providers import E5Embedder
from app.settings import available_cpus
from bench.retrieval_sets import LONGMEMEVAL, locomo, longmemeval
from testkit.bulk import import_passages_async
from testkit.scripted_llm import ScriptedLLM, call, slow, tools
from testkit.service_process import running_service, scripted_env

METRIC = re.compile(
    r'^(engram_turn_phase_seconds|engram_turn_lock_wait_seconds)_(sum|count)\{(?:phase|outcome)="([^"]+)"\} (\S+)$'
)


def histograms(text: str) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = {}
    for line in text.splitlines():
        if m := METRIC.match(line):
            out.setdefault((m[1], m[3]), {})[m[2]] = float(m[4])
    return out


async def run_turns(base: str, agent_id: str, messages: list[str], pause: float = 0.0) -> list[float]:
    """`pause`: seconds between a reply and the next message (0: at once, so the next turn meets the work the last
    one left behind it, its message vectors)."""
    latencies = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for message in messages:
            await asyncio.sleep(pause)
            started = time.perf_counter()
            response = await client.post(f"/v1/agents/{agent_id}/chat", json={"message": message})
            latencies.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200 and response.json()["stop_reason"] == "end_turn", response.text
    return latencies


async def llm_round_trips(url: str, request: dict[str, Any], n: int) -> list[float]:
    client = AsyncOpenAI(base_url=url, api_key="bench")
    latencies = []
    for _ in range(n):
        started = time.perf_counter()
        # As the service sends it (app/llm/chat.py): create() would first walk the request through the SDK's
        # TypedDict transform, ~27 ms for this one's 12 kB of tools and messages — not the LLM's time.
        await client.post("/chat/completions", body=request, cast_to=ChatCompletion)
        latencies.append((time.perf_counter() - started) * 1000)
    await client.close()
    return latencies


async def bench(base: str, llm: ScriptedLLM, passages: list[str], questions: list[str], turns: int, pause: float) -> float:
    """Prints the turns' figures; returns our own time per turn (ms)."""
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        agent = (await client.post("/v1/agents", json={"name": "turn bench"})).json()
        await import_passages_async(client, agent["id"], passages)
    await run_turns(base, agent["id"], questions[:5], pause)
    before = histograms(httpx.get(f"{base}/metrics").text)
    measured = sorted(await run_turns(base, agent["id"], questions[5 : 5 + turns], pause))
    after = histograms(httpx.get(f"{base}/metrics").text)
    await asyncio.sleep(1)  # the last turn's message embeddings
    round_trips = sorted(await llm_round_trips(llm.url, llm.requests[-1], turns))

    turn_p50, llm_p50 = statistics.median(measured), statistics.median(round_trips)
    spent = {key: after[key]["sum"] - before.get(key, {}).get("sum", 0) for key in after}
    llm_inside = spent.get(("engram_turn_phase_seconds", "llm"), 0) / turns * 1000
    print(
        f"{turns} one-step turns over HTTP, {len(passages)} archival passages, {available_cpus()} CPUs, {pause} s between turns"
    )
    print(f"turn p50 {turn_p50:.1f} ms, p95 {np.percentile(measured, 95):.1f} ms")
    print(f"LLM round trip (same request, openai client) p50 {llm_p50:.1f} ms, p95 {np.percentile(round_trips, 95):.1f} ms")
    print(f"the service's own LLM calls during the turns: mean {llm_inside:.1f} ms")
    # The smaller of the two LLM figures is subtracted: what is left is at least our own time.
    own = turn_p50 - min(llm_p50, llm_inside)
    print(f"our own time per turn (p50 turn - LLM): {own:.1f} ms\n")
    print("where a turn's time goes (mean per turn, ms):")
    for key in sorted(spent, key=lambda k: -spent[k]):
        name = key[1] if key[0] == "engram_turn_phase_seconds" else f"lock wait ({key[1]})"
        print(f"  {name:22} {spent[key] / turns * 1000:7.2f}")
    return own


async def embedding_alone(messages: list[str], idle: float, threads: int) -> list[float]:
    """The raw embedder's time (ms) for each message as a query, `idle` seconds after the one before."""
    embedder = E5Embedder(threads)
    await embedder.embed_query(messages[0])  # loaded and warm, as the service's is after its warm-up turns
    latencies = []
    for message in messages:
        await asyncio.sleep(idle)
        started = time.perf_counter()
        await embedder.embed_query(message)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=("longmemeval", "locomo"), default="longmemeval", help="locomo: short messages")
    parser.add_argument("--data", type=Path, default=LONGMEMEVAL, help="the LongMemEval file")
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--llm-seconds", type=float, default=0.0, help="how long the scripted LLM takes to answer")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between a reply and the next message")
    parser.add_argument("--embedding-threads", type=int, default=available_cpus(), help="ENGRAM_EMBEDDING_THREADS of the service")
    args = parser.parse_args()
    if args.set == "locomo":  # short messages: one conversation's lines as memory, its questions as messages
        [conversation, *_] = locomo().corpora
        passages, questions = conversation.passages[: args.passages], [q.text for q in conversation.questions]
    else:
        corpora = longmemeval(args.data).corpora
        passages = [p for c in corpora for p in c.passages][: args.passages]
        questions = [c.questions[0].text for c in corpora] * 4
    llm = ScriptedLLM().start()
    answer = tools(call("send_message", text="Noted."))
    llm.reset(fallback=slow(answer, args.llm_seconds) if args.llm_seconds else answer)
    try:
        with tempfile.TemporaryDirectory(prefix="engram-turn-") as data_dir:
            env = scripted_env(data_dir, llm.url, ENGRAM_EMBEDDING_THREADS=str(args.embedding_threads))
            with running_service(env) as base:
                own = asyncio.run(bench(base, llm, passages, questions, args.turns, args.pause))
    finally:
        llm.stop()
    idle = args.llm_seconds + args.pause
    alone = asyncio.run(embedding_alone(questions[5 : 5 + args.turns], idle, args.embedding_threads))
    print(
        f"\nthe query embedding alone (raw embedder, same messages, {idle:g} s idle between as outside the service): p50 "
        f"{statistics.median(alone):.1f} ms, p95 {np.percentile(alone, 95):.1f} ms; our own time less it "
        f"{own - statistics.median(alone):.1f} ms"
    )


if __name__ == "__main__":
    main()
