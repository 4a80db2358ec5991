"""Tasks detached from the request that started them, kept by reference (an unreferenced task can be
garbage-collected mid-run) and settled at shut-down: turns (a client that disconnects does not cut a turn in half)
and message embeddings."""

import asyncio
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class DetachedTasks(Generic[T]):
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[T]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[T]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            task.exception()  # retrieved here so that a task nobody awaited does not log "never retrieved"

    async def shutdown(self, grace_seconds: float) -> None:
        """Let the tasks finish within the grace period, then cancel the rest."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace_seconds)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)

    def cancel_all(self) -> None:
        for task in self._tasks:
            task.cancel()
