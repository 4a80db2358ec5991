"""The background tasks turns run in, kept and awaited at shut-down."""

import asyncio
from typing import Any

from app.chat.runner import TurnResult


class TurnTasks:
    """Turns run as tasks of their own: a client that disconnects does not cut a turn in half."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[TurnResult]] = set()

    def spawn(self, coro: Any) -> asyncio.Task[TurnResult]:
        task: asyncio.Task[TurnResult] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[TurnResult]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            task.exception()  # retrieved here so that a turn nobody awaited does not log "never retrieved"

    async def shutdown(self, grace_seconds: float) -> None:
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace_seconds)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
