"""The only I/O of the client: flows (_core.py) run over httpx, blocking for `Engram`, awaited for `AsyncEngram`."""

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar

import httpx
from httpx_sse import EventSource

from engram_client._binding import Async, Runner, Sync
from engram_client._core import Done, EventStream, Flow, Pause, Request, Retries, Step, advance, executed
from engram_client.errors import EngramConnectionError

T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class _Runner(Generic[H]):
    def __init__(self, http: H, base_url: str, headers: dict[str, str], retries: Retries, *, owns: bool) -> None:
        self.http: H = http
        self.base_url = base_url
        self.headers = headers
        self.retries = retries
        self.owns = owns  # a client made here is closed here; one passed in is its owner's

    def built(self, request: Request) -> httpx.Request:
        return self.http.build_request(
            request.method,
            self.base_url + request.path,
            params=request.params,
            json=request.json,
            content=request.content,
            headers=self.headers | request.headers,
        )


class SyncRunner(_Runner[httpx.Client], Runner[Sync]):
    def run(self, flow: Flow[T]) -> T:
        flow, answer = executed(flow, self.retries), None
        while not isinstance(step := advance(flow, answer), Done):
            answer = self._do(step)
        return step.value

    def _do(self, step: Step) -> httpx.Response | None:
        if isinstance(step, Pause):
            time.sleep(step.seconds)
            return None
        try:
            response = self.http.send(self.built(step), stream=step.stream)
            if step.stream and not response.is_success:
                response.read()  # the error's body, read and the connection let go
        except httpx.TransportError as exc:
            raise EngramConnectionError(exc) from exc
        return response

    def events(self, stream: EventStream[T]) -> Iterator[T]:
        response = self.run(stream.opening)
        try:
            for event in EventSource(response).iter_sse():
                yield stream.parse(event.data)
        finally:
            response.close()

    def bind(self, build: Callable[..., Flow[T]]) -> Callable[..., T]:
        return functools.wraps(build)(lambda *args, **kwargs: self.run(build(*args, **kwargs)))

    def bind_stream(self, build: Callable[..., EventStream[T]]) -> Callable[..., Iterator[T]]:
        return functools.wraps(build)(lambda *args, **kwargs: self.events(build(*args, **kwargs)))

    def close(self) -> None:
        if self.owns:
            self.http.close()


class AsyncRunner(_Runner[httpx.AsyncClient], Runner[Async]):
    async def run(self, flow: Flow[T]) -> T:
        flow, answer = executed(flow, self.retries), None
        while not isinstance(step := advance(flow, answer), Done):
            answer = await self._do(step)
        return step.value

    async def _do(self, step: Step) -> httpx.Response | None:
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
            return None
        try:
            response = await self.http.send(self.built(step), stream=step.stream)
            if step.stream and not response.is_success:
                await response.aread()
        except httpx.TransportError as exc:
            raise EngramConnectionError(exc) from exc
        return response

    async def events(self, stream: EventStream[T]) -> AsyncIterator[T]:
        response = await self.run(stream.opening)
        try:
            async for event in EventSource(response).aiter_sse():
                yield stream.parse(event.data)
        finally:
            await response.aclose()

    def bind(self, build: Callable[..., Flow[T]]) -> Callable[..., Any]:
        @functools.wraps(build)
        async def method(*args: Any, **kwargs: Any) -> T:
            return await self.run(build(*args, **kwargs))

        return method

    def bind_stream(self, build: Callable[..., EventStream[T]]) -> Callable[..., AsyncIterator[T]]:
        return functools.wraps(build)(lambda *args, **kwargs: self.events(build(*args, **kwargs)))

    async def aclose(self) -> None:
        if self.owns:
            await self.http.aclose()
