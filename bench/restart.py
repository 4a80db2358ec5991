"""Ready means ready (issue 54): after a restart of `engram serve`, is the first request as fast as the next?

`engram serve` runs as a real process on its embedded defaults (the embedded PostgreSQL, the local
multilingual-e5-small embedder) with a scripted OpenAI-compatible LLM on loopback (testkit/scripted_llm.py) that
answers every request at once with a `send_message` call. One data directory is kept across the restarts, as a
restart keeps it: a first process stores an agent's memories (archival passages and a conversation handed in), then
the service is started --restarts times; each start starts the embedded PostgreSQL again and each stop stops it.
Per restart:
1. Ready: from the process's start (`Popen`) to the first 200 of `/readyz` (polled every 20 ms).
2. The first request after ready, then --warm more of its kind, then the first of the other kind and --warm more:
   restarts alternate which kind comes first, so that each kind is the very first request after half of them.
   The kinds: a recollection (`POST …/recollection`) and a chat turn (`POST …/chat`, automatic recollection on).
Printed: p50 of ready; per kind, p50 of the first request when it came first after ready, when it came after the
other kind, and warm (every request after the first of its kind), and first / warm (target: within 1.5×).

    python -m bench.restart [--restarts 10] [--warm 5]     # about a minute per restart on 2 cores
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from testkit.scripted_llm import ScriptedLLM, call, free_port, tools
from testkit.service_process import scripted_env, stop_service

PASSAGES = [
    "Aiko lives in Osaka and works as a pharmacist.",
    "アイコの好きな食べ物は抹茶アイスです。",
    "Aiko's brother Ken plays the cello in an orchestra in Vienna.",
    "アイコは毎週土曜日に公園でジョギングをしています。",
    "Aiko is allergic to peanuts.",
    "Aiko's cat is called Mochi and is nine years old.",
]
CONVERSATION = [
    ("user", "My sister Yuki works as a nurse in Sapporo."),
    ("assistant", "That sounds like demanding work!"),
    ("user", "来週の金曜日、京都で茶道の体験をします。"),
    ("assistant", "素敵ですね！楽しんでください。"),
]
# Each request asks something else: nothing the service could keep from one request answers the next.
QUESTIONS = [
    "What am I doing in Kyoto next week?",
    "Where does my sister work?",
    "好きな食べ物は何？",
    "What is my cat called?",
    "アイコの兄弟は何をしていますか？",
    "Am I allergic to anything?",
    "週末は何をしているの？",
    "Where do I live?",
    "What instrument does Ken play?",
    "妹の仕事は？",
    "How old is Mochi?",
    "What did I tell you about tea ceremonies?",
]
KINDS = ("recollection", "chat turn")


@dataclass
class Figures:
    ready: list[float] = field(default_factory=list)
    first: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})  # the first request
    second: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})  # first of its kind
    warm: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})


def start(env: dict[str, str]) -> tuple[subprocess.Popen[str], str, float]:
    """`engram serve` started now, its URL, and the seconds from its start to the first 200 of /readyz."""
    port = free_port()
    began = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"engram serve exited with {process.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return process, base, time.monotonic() - began
        except httpx.TransportError:
            pass
        if time.monotonic() - began > 300:
            stop_service(process)
            raise RuntimeError("engram serve was not ready within 300 s")
        time.sleep(0.02)


def timed(request: Callable[[], httpx.Response]) -> float:
    began = time.monotonic()
    response = request()
    elapsed = time.monotonic() - began
    response.raise_for_status()
    return elapsed


def requests(base: str, agent: str, client: httpx.Client) -> dict[str, Callable[[str], float]]:
    return {
        "recollection": lambda q: timed(lambda: client.post(f"{base}/v1/agents/{agent}/recollection", json={"query": q})),
        "chat turn": lambda q: timed(lambda: client.post(f"{base}/v1/agents/{agent}/chat", json={"message": q})),
    }


def store_memories(env: dict[str, str]) -> str:
    """A first process: an agent with archival passages and a conversation handed in; its id."""
    process, base, _ = start(env)
    try:
        with httpx.Client(timeout=120) as client:
            agent: str = client.post(f"{base}/v1/agents", json={"name": "Aiko"}).raise_for_status().json()["id"]
            for passage in PASSAGES:
                client.post(f"{base}/v1/agents/{agent}/archival", json={"content": passage}).raise_for_status()
            messages = [{"role": r, "content": c, "occurred_at": "2024-05-01"} for r, c in CONVERSATION]
            client.post(f"{base}/v1/agents/{agent}/messages", json={"messages": messages}).raise_for_status()
    finally:
        stop_service(process)
    return agent


def restart(env: dict[str, str], agent: str, order: tuple[str, str], warm: int, figures: Figures) -> None:
    process, base, ready = start(env)
    figures.ready.append(ready)
    questions = iter(QUESTIONS * (2 * warm + 2))
    try:
        with httpx.Client(timeout=300) as client:
            ask = requests(base, agent, client)
            for position, kind in enumerate(order):
                (figures.first if position == 0 else figures.second)[kind].append(ask[kind](next(questions)))
                figures.warm[kind] += [ask[kind](next(questions)) for _ in range(warm)]
    finally:
        stop_service(process)
    print(
        f"  ready {ready:6.2f} s; {order[0]} first {figures.first[order[0]][-1] * 1000:8.1f} ms, then {order[1]} "
        f"{figures.second[order[1]][-1] * 1000:8.1f} ms",
        flush=True,
    )


def report(figures: Figures, restarts: int, warm: int) -> None:
    print(f"\n{restarts} restarts on one embedded database, {warm} warm requests of each kind after each first one")
    print(f"process start -> /readyz ready: p50 {statistics.median(figures.ready):.2f} s (max {max(figures.ready):.2f})")
    print(f"{'kind':14} {'first after ready':>18} {'first of its kind':>18} {'warm':>9} {'first / warm':>13}")
    for kind in KINDS:
        first, second, hot = (statistics.median(f[kind]) * 1000 for f in (figures.first, figures.second, figures.warm))
        print(f"{kind:14} {first:15.1f} ms {second:15.1f} ms {hot:6.1f} ms {first / hot:12.2f}×")
    print("(first after ready: the restarts where the kind came first; first of its kind: after the other kind's)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--restarts", type=int, default=10)
    parser.add_argument("--warm", type=int, default=5, help="requests of each kind after its first, per restart")
    args = parser.parse_args()
    llm = ScriptedLLM().start()
    llm.reset(fallback=tools(call("send_message", text="はい、覚えています。")))
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix="engram-restart-") as data:
        env = {**os.environ, **scripted_env(data, llm.url)}
        agent = store_memories(env)
        for n in range(args.restarts):
            restart(env, agent, KINDS if n % 2 == 0 else KINDS[::-1], args.warm, figures)
    llm.stop()
    report(figures, args.restarts, args.warm)


if __name__ == "__main__":
    main()
