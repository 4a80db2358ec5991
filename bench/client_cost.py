"""What the Python client costs (issue 56): a recollection through `engram_client.Engram` beside the same request
made with bare httpx, against the same `engram serve`.

`engram serve` runs as a real process on its embedded defaults (the embedded PostgreSQL, the local
multilingual-e5-small embedder, no LLM), its embedder on one thread (ENGRAM_EMBEDDING_THREADS=1: no OpenMP barrier
for other load on the machine to stall, so its answers take steadier times; the client's cost does not depend on
them); an agent is given a few passages and a conversation. Then:
1. Served: --rounds rounds, each one `engram.recall(agent, question)`, one `POST …/recollection` with an httpx
   client of the same kind (its JSON parsed) and the same with a second httpx client (a control), each first, second
   and third in turn; a question per round, the same for every side. Printed: p50 / p95 of each side, the p50
   difference (target: within 1 ms), the ratio Engram / httpx, and the median of each round's difference (a round's
   requests meet the same load: the steadier estimate on a busy machine); the control's, beside the first httpx
   client's, is the noise of the comparison (what two identical sides differ by).
2. The client alone: the same two calls answered by an in-process transport with the served answer recorded in 1
   (httpx.MockTransport; no network, no server), sync and async, --rounds x 10 each: what the client itself adds
   (building the request, its retry loop, reading the answer into pydantic models) beside httpx reading it as JSON.

    python -m bench.client_cost [--rounds 300]     # about a minute on 2 cores, most of it the service's start
"""

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx
from engram_client import AsyncEngram, Engram

from testkit.service_process import running_service

PASSAGES = [
    "Aiko lives in Osaka and works as a pharmacist.",
    "アイコの好きな食べ物は抹茶アイスです。",
    "Aiko's brother Ken plays the cello in an orchestra in Vienna.",
    "Aiko is allergic to peanuts.",
    "Aiko's cat is called Mochi and is nine years old.",
]
CONVERSATION = [
    {"role": "user", "content": "My sister Yuki works as a nurse in Sapporo."},
    {"role": "assistant", "content": "That sounds like demanding work!"},
    {"role": "user", "content": "来週の金曜日、京都で茶道の体験をします。"},
]
QUESTIONS = ["What am I doing in Kyoto next week?", "Where does my sister work?", "好きな食べ物は何？", "Where do I live?"]


def timed(call: Callable[..., object], *arguments: object) -> float:
    """Milliseconds the call takes."""
    started = time.perf_counter()
    call(*arguments)
    return (time.perf_counter() - started) * 1000


def summary(name: str, times: list[float]) -> str:
    p95 = statistics.quantiles(times, n=20)[18]
    return f"  {name:<22} p50 {statistics.median(times):8.3f} ms   p95 {p95:8.3f} ms   ({len(times)})"


def compare(title: str, engram_times: list[float], httpx_times: list[float]) -> None:
    print(title)
    print(summary("engram_client.Engram", engram_times))
    print(summary("bare httpx", httpx_times))
    print(difference("Engram - httpx", engram_times, httpx_times))


def difference(name: str, times: list[float], baseline: list[float]) -> str:
    p50, base = statistics.median(times), statistics.median(baseline)
    paired = statistics.median(t - b for t, b in zip(times, baseline, strict=True))
    return f"  {name}: p50 difference {p50 - base:+.3f} ms, ratio {p50 / base:.3f}; median of the paired differences {paired:+.3f} ms"


def served(base: str, rounds: int) -> tuple[str, bytes]:
    """Part 1; returns the agent's id and a recorded answer for part 2."""
    with (
        Engram(base) as engram,
        httpx.Client(base_url=base, timeout=60) as http,
        httpx.Client(base_url=base, timeout=60) as control,
    ):
        agent = engram.agents.create("client cost").id
        engram.archival.add_many(agent, PASSAGES)
        engram.messages.add(agent, CONVERSATION)
        path = f"/v1/agents/{agent}/recollection"

        def bare(client: httpx.Client) -> Callable[[str], Any]:
            return lambda question: client.post(path, json={"query": question}).raise_for_status().json()

        sides: list[tuple[list[float], Callable[[str], Any]]] = [
            ([], lambda question: engram.recall(agent, question)),
            ([], bare(http)),
            ([], bare(control)),
        ]
        for question in QUESTIONS * 5:  # warm: connections, the embedder, the database's caches
            for _, call in sides:
                call(question)
        for round_ in range(rounds):  # each side first, second and third in turn
            for times, call in sides[round_ % 3 :] + sides[: round_ % 3]:
                times.append(timed(call, QUESTIONS[round_ % len(QUESTIONS)]))
        recorded = http.post(path, json={"query": QUESTIONS[0]}).raise_for_status().content
    (engram_times, _), (httpx_times, _), (control_times, _) = sides
    compare(f"1. served: recall of {len(PASSAGES)} passages and {len(CONVERSATION)} messages", engram_times, httpx_times)
    print(
        difference("control, a second bare httpx client - the first (the noise of this comparison)", control_times, httpx_times)
    )
    return str(agent), recorded


def client_alone(agent: str, recorded: bytes, rounds: int) -> None:
    """Part 2: both sides answered at once by the same in-process transport."""
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, content=recorded, headers={"content-type": "application/json"})
    )
    path = f"http://engram/v1/agents/{agent}/recollection"
    with (
        Engram("http://engram", http_client=httpx.Client(transport=transport)) as engram,
        httpx.Client(transport=transport) as http,
    ):
        engram_times = [timed(lambda: engram.recall(agent, "Where do I live?")) for _ in range(rounds)]
        httpx_times = [
            timed(lambda: http.post(path, json={"query": "Where do I live?"}).raise_for_status().json()) for _ in range(rounds)
        ]
    compare("2. the client alone, sync (an in-process transport answers)", engram_times, httpx_times)

    async def both() -> tuple[list[float], list[float]]:
        async with (
            AsyncEngram("http://engram", http_client=httpx.AsyncClient(transport=transport)) as aengram,
            httpx.AsyncClient(transport=transport) as ahttp,
        ):
            engram_times, httpx_times = [], []
            for _ in range(rounds):
                started = time.perf_counter()
                await aengram.recall(agent, "Where do I live?")
                engram_times.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                (await ahttp.post(path, json={"query": "Where do I live?"})).raise_for_status().json()
                httpx_times.append((time.perf_counter() - started) * 1000)
            return engram_times, httpx_times

    compare("   async", *asyncio.run(both()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="engram-client-cost-") as data,
        running_service({"ENGRAM_DATA_DIR": data, "ENGRAM_EMBEDDING_THREADS": "1"}) as base,
    ):
        agent, recorded = served(base, args.rounds)
    client_alone(agent, recorded, args.rounds * 10)


if __name__ == "__main__":
    main()
