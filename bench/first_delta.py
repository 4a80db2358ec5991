"""Time to the first piece of the reply: from the LLM sending the reply's first characters to the client seeing them.

A scripted OpenAI-compatible LLM (testkit/scripted_llm.py, in this process) streams a `send_message` call in pieces
and notes when it sends each; Engram (`engram serve`, a real process on its embedded PostgreSQL) relays the reply.
Per turn: the LLM's chunk carrying the reply's first characters -> the first `message_delta` at the client, over
SSE (`POST …/chat`), the WebSocket, and the OpenAI-compatible stream (first content chunk). Peer in the same run:
the `openai` SDK reading the same LLM's stream directly, with the same partial-JSON read of the arguments (what any
client of a streaming LLM pays). Printed: p50/p95 of each, and Engram's extra over the peer at the median.

    python -m bench.first_delta [--turns 40]
"""

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable

import httpx
import openai
from openai.types.chat import ChatCompletionToolParam
from pydantic_core import from_json
from websockets.sync.client import connect

from testkit.scripted_llm import STREAM_PIECE_CHARS, ScriptedLLM, call, tools
from testkit.service_process import running_service, scripted_env

REPLY = "はい、覚えています。You told me about the ramen place near Kyoto station last spring."
# The reply's first characters are in the arguments' piece that holds the text's first character; the chunks before
# the arguments are the role and the call's head.
FIRST_TEXT_CHUNK = 2 + len('{"text": "') // STREAM_PIECE_CHARS


def first_text_sent(llm: ScriptedLLM) -> float:
    return llm.stream_times[-1][FIRST_TEXT_CHUNK]


def sse(base: str, agent: str) -> float:
    with httpx.stream(
        "POST", f"{base}/v1/agents/{agent}/chat", json={"message": "覚えてる？"}, headers={"Accept": "text/event-stream"}
    ) as response:
        seen = None
        for line in response.iter_lines():  # the whole turn: the next one must not find this one running
            if seen is None and line.startswith("data: ") and json.loads(line[6:])["type"] == "message_delta":
                seen = time.monotonic()
    assert seen is not None
    return seen


def socket(base: str, agent: str) -> float:
    seen = None
    with connect(base.replace("http", "ws") + f"/v1/agents/{agent}/ws") as ws:
        ws.send(json.dumps({"type": "chat", "message": "覚えてる？"}))
        while (event := json.loads(ws.recv(timeout=30)))["type"] != "turn_completed":
            if event["type"] == "message_delta" and seen is None:
                seen = time.monotonic()
    assert seen is not None
    return seen


def openai_compatible(base: str, agent: str) -> float:
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    seen = None
    for chunk in client.chat.completions.create(model=agent, messages=[{"role": "user", "content": "覚えてる？"}], stream=True):
        if seen is None and chunk.choices and chunk.choices[0].delta.content:
            seen = time.monotonic()
    assert seen is not None
    return seen


def direct(llm: ScriptedLLM) -> float:
    """The peer: the LLM's own stream read with the openai SDK, the text taken out of the partial arguments."""
    client = openai.OpenAI(base_url=llm.url, api_key="unused", max_retries=0)
    arguments, seen = "", None
    tool: ChatCompletionToolParam = {"type": "function", "function": {"name": "send_message", "parameters": {"type": "object"}}}
    stream = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "覚えてる？"}],
        tools=[tool],
        stream=True,
    )
    for chunk in stream:
        for piece in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            arguments += (piece.function and piece.function.arguments) or ""
            if seen is None and arguments and from_json(arguments, allow_partial="trailing-strings").get("text"):
                seen = time.monotonic()
    assert seen is not None
    return seen


def measure(llm: ScriptedLLM, turns: int, run: Callable[[], float]) -> list[float]:
    """Milliseconds from the LLM's first reply chunk to the client's first sight of it, per turn."""
    delays = []
    for _ in range(turns):
        llm.reset(tools(call("send_message", text=REPLY)))
        seen = run()
        delays.append((seen - first_text_sent(llm)) * 1000)
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    llm = ScriptedLLM().start()
    with tempfile.TemporaryDirectory() as data:
        # the turn's own work before the LLM call is not what is measured
        env = scripted_env(data, llm.url, ENGRAM_AUTO_RETRIEVAL="false")
        with running_service(env) as base:
            agent = httpx.post(f"{base}/v1/agents", json={"name": "bench"}).json()["id"]
            measure(llm, 3, lambda: sse(base, agent))  # warm: connections, the first turn's caches
            results = {
                "peer: the LLM's stream read directly": measure(llm, args.turns, lambda: direct(llm)),
                "SSE  POST …/chat": measure(llm, args.turns, lambda: sse(base, agent)),
                "WS   …/ws": measure(llm, args.turns, lambda: socket(base, agent)),
                "OpenAI-compatible stream": measure(llm, args.turns, lambda: openai_compatible(base, agent)),
            }
    llm.stop()
    peer = statistics.median(results["peer: the LLM's stream read directly"])
    print(f"time to the first piece of the reply, ms after the LLM sent it ({args.turns} turns each)")
    print(f"{'path':40} {'p50':>7} {'p95':>7} {'p50 - peer':>11}")
    for name, delays in results.items():
        p50, p95 = statistics.median(delays), statistics.quantiles(delays, n=20)[-1]
        print(f"{name:40} {p50:7.2f} {p95:7.2f} {p50 - peer:11.2f}")


if __name__ == "__main__":
    main()
