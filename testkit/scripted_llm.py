"""A scripted OpenAI-compatible LLM on loopback. Tests queue its answers; the service reaches it through the real
`openai` client over HTTP, exactly as it would reach OpenAI, Gemini or Ollama."""

import asyncio
import json
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

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


def last_tool_result(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "tool")


class ScriptedLLM:
    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.fallback: Reply | None = None  # answers when the script is empty
        self.requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.embedding_delay = 0.0  # seconds each /v1/embeddings request takes (a slow embedding service)
        self.embedding_refusals: dict[str, int] = {}  # a marker -> the status of any request with an input holding it
        self.embedding_shortfall = 0  # vectors left out of every /v1/embeddings answer (a misbehaving server)
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
        async def completions(request: Request) -> JSONResponse:
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
            data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(text)} for i, text in enumerate(kept)]
            return JSONResponse(
                {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 0, "total_tokens": 0}}
            )

        return app


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
        return sock.getsockname()[1]
