"""`Engram` and `AsyncEngram`: the same calls, blocking or awaited (each call is written once: _binding.py)."""

import os
from types import TracebackType
from typing import Self

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


class _Client(Resource[M]):
    """What both clients offer: `agents`, `memory` (core), `archival`, `messages` (recall), `turns`, and `recall`,
    `chat`, `chat_stream`, `memory_pass`."""

    def __init__(self, runner: Runner[M]) -> None:
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


def _settings(
    base_url: str | None, api_key: str | None, max_retries: int, max_retry_wait: float
) -> tuple[str, dict[str, str], Retries]:
    """The service's URL and the headers of every request, from the arguments or else the environment; retries."""
    url = (base_url or os.environ.get("ENGRAM_URL") or DEFAULT_URL).rstrip("/")
    key = api_key if api_key is not None else os.environ.get("ENGRAM_API_KEY")
    headers = {"User-Agent": f"engram-client/{__version__}", "Accept": "application/json"}
    headers |= {"Authorization": f"Bearer {key}"} if key else {}
    return url, headers, Retries(max_retries, max_wait=max_retry_wait)


class Engram(_Client[Sync]):
    """A client of the Engram service at `base_url` (default: $ENGRAM_URL, else http://localhost:8000) with
    `api_key` (default: $ENGRAM_API_KEY; none on loopback without keys). 429 and 503 are tried again up to
    `max_retries` times, after the Retry-After the answer gives (one over `max_retry_wait` seconds is raised at once,
    as RateLimited or ServiceUnavailable with `retry_after`). `http_client`: an httpx.Client of your own (proxies,
    certificates, transports), which stays yours to close. Close this client, or use it as a context manager."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url, headers, retries = _settings(base_url, api_key, max_retries, max_retry_wait)
        http = http_client or httpx.Client(timeout=timeout)
        self._sync = SyncRunner(http, self.base_url, headers, retries, owns=http_client is None)
        super().__init__(self._sync)

    def close(self) -> None:
        self._sync.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


class AsyncEngram(_Client[Async]):
    """`Engram`, awaited: every call is a coroutine, `chat_stream` an async iterator. Close it with `await
    aclose()`, or use it as an async context manager."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url, headers, retries = _settings(base_url, api_key, max_retries, max_retry_wait)
        http = http_client or httpx.AsyncClient(timeout=timeout)
        self._async = AsyncRunner(http, self.base_url, headers, retries, owns=http_client is None)
        super().__init__(self._async)

    async def aclose(self) -> None:
        await self._async.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        await self.aclose()
