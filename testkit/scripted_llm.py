"""A scripted OpenAI-compatible LLM on loopback. Tests queue its answers; the service reaches it through the real
`openai` client over HTTP, exactly as it would reach OpenAI, Gemini or Ollama."""

import asyncio
import json
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def call(name: str, arguments: dict[str, Any] | str | None = None, **kwargs: Any) -> dict[str, Any]:
    """One native tool call; a str `arguments` is sent verbatim (to script malformed JSON)."""
    args = arguments if arguments is not None else kwargs
    raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": {"name": name, "arguments": raw}}


def tools(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """An assistant message with tool calls (and optional inner monologue)."""
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def text(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def error(status: int, message: str = "scripted failure") -> dict[str, Any]:
    return {"__status__": status, "error": {"message": message, "type": "server_error"}}


def slow(reply: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The same answer, sent after `seconds` (the server keeps answering others meanwhile)."""
    return {**reply, "__delay__": seconds}


def held(reply: dict[str, Any], gate: threading.Event, timeout: float = 30.0) -> dict[str, Any]:
    """The same answer, sent once the test sets `gate` (or after `timeout` seconds)."""
    return {**reply, "__gate__": (gate, timeout)}


def cut(reply: dict[str, Any], after_chunks: int) -> dict[str, Any]:
    """The same answer, but a stream of it breaks off after `after_chunks` chunks (the connection drops)."""
    return {**reply, "__cut__": after_chunks}


def paused(reply: dict[str, Any], after_chunks: int, gate: threading.Event, timeout: float = 30.0) -> dict[str, Any]:
    """The same answer, but a stream of it stops after `after_chunks` chunks until the test sets `gate`."""
    return {**reply, "__pause__": (after_chunks, gate, timeout)}


def last_tool_result(request: dict[str, Any]) -> str:
    content: str = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "tool")
    return content


class ScriptedLLM:
    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.fallback: Reply | None = None  # answers when the script is empty
        self.requests: list[dict[str, Any]] = []
        self.stream_times: list[list[float]] = []  # per streamed answer: when each chunk was sent (time.monotonic())
        self.embedding_requests: list[dict[str, Any]] = []
        self.embedding_delay = 0.0  # seconds each /v1/embeddings request takes (a slow embedding service)
        self.embedding_refusals: dict[str, int] = {}  # a marker -> the status of any request with an input holding it
        self.embedding_shortfall = 0  # vectors left out of every /v1/embeddings answer (a misbehaving server)
        self.embedding_length = 1.0  # the length of every vector answered (a server that does not normalise them)
        self._lock = threading.Lock()
        self.app = self._build()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self) -> "ScriptedLLM":
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted LLM did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)

    def reset(self, *replies: Reply, fallback: Reply | None = None) -> None:
        with self._lock:
            self.script = deque(replies)
            self.fallback = fallback
            self.requests.clear()

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    @property
    def remaining(self) -> int:
        return len(self.script)

    def _build(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def completions(request: Request) -> Response:
            body = await request.json()
            with self._lock:
                self.requests.append(body)
                reply = (
                    self.script.popleft() if self.script else self.fallback or error(500, "the test script has no more replies")
                )
            message = reply(body) if callable(reply) else reply
            if "__gate__" in message:
                gate, timeout = message["__gate__"]
                await asyncio.to_thread(gate.wait, timeout)
                message = {k: v for k, v in message.items() if k != "__gate__"}
            if "__delay__" in message:
                await asyncio.sleep(message["__delay__"])
                message = {k: v for k, v in message.items() if k != "__delay__"}
            if "__status__" in message:
                return JSONResponse({"error": message["error"]}, status_code=message["__status__"])
            if body.get("stream"):
                sent: list[float] = []
                with self._lock:
                    self.stream_times.append(sent)
                return StreamingResponse(_streamed(body, message, sent), media_type="text/event-stream")
            return JSONResponse(
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}
                    ],
                    "usage": {
                        "prompt_tokens": len(json.dumps(body["messages"])) // 4,
                        "completion_tokens": 10,
                        "total_tokens": 0,
                    },
                }
            )

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> JSONResponse:
            body = await request.json()
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            with self._lock:
                self.embedding_requests.append(body)
            if self.embedding_delay:
                await asyncio.sleep(self.embedding_delay)
            for marker, status in list(self.embedding_refusals.items()):
                if any(marker in text for text in inputs):
                    return JSONResponse(
                        {"error": {"message": f"scripted refusal of {marker}", "type": "invalid_request_error"}},
                        status_code=status,
                    )
            kept = inputs[: max(len(inputs) - self.embedding_shortfall, 0)]
            data = [
                {"object": "embedding", "index": i, "embedding": [x * self.embedding_length for x in hashed_embedding(text)]}
                for i, text in enumerate(kept)
            ]
            return JSONResponse(
                {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 0, "total_tokens": 0}}
            )

        return app


# A streamed answer comes in pieces of this many characters, as a model writes tokens; a long text in at most
# STREAM_MAX_PIECES (a test's 28,000-character message need not take 5,600 chunks).
STREAM_PIECE_CHARS = 5
STREAM_MAX_PIECES = 64
STREAM_PAUSE_SECONDS = 0.001  # between pieces: a model writes them apart in time, and watchers see them apart


async def _streamed(body: dict[str, Any], message: dict[str, Any], sent: list[float]) -> AsyncIterator[str]:
    """The answer as OpenAI streams it: `chat.completion.chunk` events (text and each call's arguments in pieces),
    the usage when asked for, `[DONE]`; a `cut` answer breaks off mid-stream. `sent`: when each delta's chunk went
    out (bench/first_delta.py)."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:8]}", "object": "chat.completion.chunk", "created": int(time.time())}
    head["model"] = body.get("model", "scripted")

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else []
        return f"data: {json.dumps(head | {'choices': choices} | extra, ensure_ascii=False)}\n\n"

    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in _pieces(message.get("content") or "")]
    for position, call in enumerate(message.get("tool_calls") or []):
        function = {"name": call["function"]["name"], "arguments": ""}
        deltas.append({"tool_calls": [{"index": position, "id": call["id"], "type": "function", "function": function}]})
        deltas += [
            {"tool_calls": [{"index": position, "function": {"arguments": p}}]} for p in _pieces(call["function"]["arguments"])
        ]
    pause_at, gate, timeout = message.get("__pause__", (None, None, 0))
    for index, delta in enumerate(deltas):
        if index == message.get("__cut__"):
            raise ConnectionAbortedError("scripted: the stream breaks off")  # uvicorn drops the connection
        if index == pause_at:
            await asyncio.to_thread(gate.wait, timeout)
        sent.append(time.monotonic())
        yield chunk(delta)
        await asyncio.sleep(STREAM_PAUSE_SECONDS)
    yield chunk({}, "tool_calls" if message.get("tool_calls") else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        yield chunk(
            None, usage={"prompt_tokens": len(json.dumps(body["messages"])) // 4, "completion_tokens": 10, "total_tokens": 0}
        )
    yield "data: [DONE]\n\n"


def _pieces(text: str) -> list[str]:
    size = max(STREAM_PIECE_CHARS, -(-len(text) // STREAM_MAX_PIECES))
    return [text[i : i + size] for i in range(0, len(text), size)]


EMBEDDING_DIM = 8


def hashed_embedding(text: str) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words point the same way."""
    vector = [0.0] * EMBEDDING_DIM
    for word in text.lower().split():
        vector[sum(word.encode()) % EMBEDDING_DIM] += 1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
