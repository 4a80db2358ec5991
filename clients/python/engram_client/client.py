"""`Engram` and `AsyncEngram`: the same calls, blocking or awaited (each call is written once: _binding.py)."""

import os
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

import httpx

from engram_client import _turns
from engram_client._agents import Agents
from engram_client._archival import Archival
from engram_client._binding import Async, M, Resource, Runner, Sync, endpoint, stream
from engram_client._core import Retries
from engram_client._memory import Memory
from engram_client._messages import Messages
from engram_client._runners import AsyncRunner, SyncRunner
from engram_client._turns import Turns
from engram_client._version import __version__

DEFAULT_URL = "http://localhost:8000"
DEFAULT_TIMEOUT = 60.0  # seconds; a chat turn runs the LLM, maybe several times
H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class _Client(Resource[M], Generic[M, H]):
    """A client of the Engram service at `base_url` (default: $ENGRAM_URL, else http://localhost:8000) with
    `api_key` (default: $ENGRAM_API_KEY; none on loopback without keys): `agents`, `memory` (core), `archival`,
    `messages` (recall), `turns`, and `recall`, `chat`, `chat_stream`, `memory_pass`. 429 and 503 are tried again up
    to `max_retries` times, after the Retry-After the answer gives (one over `max_retry_wait` seconds is raised at
    once, as RateLimited or ServiceUnavailable with `retry_after`). `http_client`: an httpx client of your own
    (proxies, certificates, transports), which stays yours to close; else one with `timeout` seconds."""

    _kinds: ClassVar[tuple[type[Any], type[Any]]]  # the runner and the httpx client this kind of client runs on

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        http_client: H | None = None,
    ) -> None:
        self.base_url = (base_url or os.environ.get("ENGRAM_URL") or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("ENGRAM_API_KEY")
        headers = {"User-Agent": f"engram-client/{__version__}", "Accept": "application/json"}
        headers |= {"Authorization": f"Bearer {key}"} if key else {}
        runner_kind, http_kind = self._kinds
        http = http_client or http_kind(timeout=timeout)
        runner: Runner[M] = runner_kind(
            http, self.base_url, headers, Retries(max_retries, max_wait=max_retry_wait), owns=http_client is None
        )
        super().__init__(runner)
        self.agents: Agents[M] = Agents(runner)
        self.memory: Memory[M] = Memory(runner)
        self.archival: Archival[M] = Archival(runner)
        self.messages: Messages[M] = Messages(runner)
        self.turns: Turns[M] = Turns(runner)

    recall = endpoint(_turns.recall)
    chat = endpoint(_turns.chat)
    chat_stream = stream(_turns.chat_stream)
    memory_pass = endpoint(_turns.memory_pass)


class Engram(_Client[Sync, httpx.Client]):
    __doc__ = _Client.__doc__
    _kinds = (SyncRunner, httpx.Client)
    _runner: SyncRunner

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


class AsyncEngram(_Client[Async, httpx.AsyncClient]):
    """`Engram`, awaited: every call a coroutine, `chat_stream` an async iterator; `await aclose()` it, or use it as
    an async context manager."""

    _kinds = (AsyncRunner, httpx.AsyncClient)
    _runner: AsyncRunner

    async def aclose(self) -> None:
        await self._runner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        await self.aclose()
