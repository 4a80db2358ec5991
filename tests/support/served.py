"""The app under uvicorn in a thread: real HTTP and WebSocket on a loopback port, served as `engram serve` serves it
(the websockets-sansio protocol, logs through the root logger so that pytest's caplog sees them), with probes into
the server's event loop for tests that count what a connection leaves behind."""

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
import uvicorn
from sqlalchemy.pool import QueuePool

from app.llm.embeddings import Embedder
from app.main import create_app
from app.runtime import runtime
from app.settings import Settings
from testkit.scripted_llm import free_port

T = TypeVar("T")


class Served:
    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}"
        self.app = create_app(settings, embedder=embedder)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=port, log_level="warning", ws="websockets-sansio", log_config=None
        )
        self.server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.server.serve(),), daemon=True)

    def __enter__(self) -> "Served":
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive(), "the service did not start"
            assert time.monotonic() < deadline, "the service did not start in 60 s"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.loop.close()

    def api(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=30)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the server's event loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def tasks(self) -> int:
        """The asyncio tasks alive in the server (not counting this probe)."""

        async def count() -> int:
            return len(asyncio.all_tasks()) - 1

        return self.run(count())

    def connections_checked_out(self) -> int:
        """Database connections the server's pool has handed out and not had back."""

        async def count() -> int:
            pool = runtime(self.app).engine.pool
            assert isinstance(pool, QueuePool)  # app/db.py's engine: a queue of connections
            return pool.checkedout()

        return self.run(count())
