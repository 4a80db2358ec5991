"""Every call of the client, written once and free of I/O. A call is a *flow*: a generator that yields what it needs
done (a `Request` to send, a `Pause`) and is sent back the answer (an `httpx.Response`; None after a pause).
`Engram` runs flows with httpx's client, `AsyncEngram` with its async one (_runners.py); retries, errors, parsing
and polling are here, the same for both."""

import random
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from string import Formatter
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx
from pydantic import BaseModel, TypeAdapter

from engram_client.errors import EngramError, engram_body, error_from, retry_after

T = TypeVar("T")
Id = str | UUID  # an agent's, passage's, message's, turn's or job's id


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False


@dataclass(frozen=True, slots=True)
class Pause:
    seconds: float


Step = Request | Pause
Flow = Generator[Step, Any, T]


@dataclass(frozen=True)
class Route(Generic[T]):
    """One operation of the API as the client calls it: the only way a `Request` is made, so that everything the
    client sends and reads is declared here, and tests/clients/python/test_contract.py checks every route against
    `openapi.json`: the path and method, the query and header parameters, the body's fields, the answer's fields."""

    method: str
    path: str  # as openapi.json writes it: /v1/agents/{agent_id}
    reads: type[T]  # what a success's JSON is read as (NoneType: no body)
    body: Any = None  # the JSON body's type
    query: type[BaseModel] | None = None  # the query parameters, as a model's fields
    headers: tuple[str, ...] = ()  # the header parameters it may send
    content_type: str = "application/json"  # of a body sent as bytes
    accept: str = "application/json"

    declared: ClassVar[list["Route[Any]"]] = []

    def __post_init__(self) -> None:
        Route.declared.append(self)

    @cached_property
    def _reader(self) -> TypeAdapter[T]:
        return TypeAdapter(self.reads)

    @cached_property
    def _writer(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.body)

    @cached_property
    def _placeholders(self) -> set[str]:
        return {name for _, name, _, _ in Formatter().parse(self.path) if name}

    def request(
        self,
        *,
        query: BaseModel | None = None,
        body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str | None] | None = None,
        **path: Id,
    ) -> Request:
        """The request for these parameters; anything the route does not declare is a TypeError."""
        if query is not None and type(query) is not self.query:
            raise TypeError(f"{self.method} {self.path} takes {self.query} as its query, not {type(query)}")
        if body is not None and self.body is None:
            raise TypeError(f"{self.method} {self.path} takes no JSON body")
        if set(path) != self._placeholders:
            raise TypeError(f"{self.method} {self.path} takes the path parameters {sorted(self._placeholders)}")
        sent = {name: value for name, value in (headers or {}).items() if value is not None}
        if undeclared := set(sent) - set(self.headers):
            raise TypeError(f"{self.method} {self.path} declares no header {sorted(undeclared)}")
        if content is not None:
            sent["Content-Type"] = self.content_type
        if self.accept != "application/json":
            sent["Accept"] = self.accept
        return Request(
            self.method,
            self.path.format(**{name: quote(str(value), safe="") for name, value in path.items()}),
            params=query.model_dump(mode="json", exclude_none=True) if query is not None else {},
            json=self._writer.dump_python(self._writer.validate_python(body), mode="json", exclude_none=True)
            if body is not None
            else None,
            content=content,
            headers=sent,
            stream=self.accept == "text/event-stream",
        )

    def read(self, response: httpx.Response) -> T:
        if self.reads is type(None):
            return None  # the route reads no body (T is None)
        return self._reader.validate_json(response.content)

    def call(self, **arguments: Any) -> Flow[T]:
        """The flow that sends the request for `arguments` (as `request` takes them) and reads the answer."""
        response = yield self.request(**arguments)
        return self.read(response)


@dataclass(frozen=True)
class Retries:
    """When a 429 or 503 is tried again: up to `max_retries` times, after the answer's Retry-After (one longer than
    `max_wait` is not waited for: the error is raised, with `retry_after`). An answer that names no wait is tried
    again after `backoff` seconds, doubled each time, jittered — unless it is Engram's own: Engram marks what
    passes with Retry-After, and its 503 without one (no LLM configured) would answer the same again."""

    max_retries: int = 3
    backoff: float = 0.5
    max_wait: float = 60.0

    def wait(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before trying `response`'s request again, or None: raise."""
        if response.status_code not in (429, 503) or attempt >= self.max_retries:
            return None
        wait = retry_after(response)
        if wait is None:
            if engram_body(response) is not None:
                return None
            wait = self.backoff * 2**attempt * random.uniform(0.5, 1.0)
        return wait if wait <= self.max_wait else None


def sent(request: Request, retries: Retries) -> Flow[httpx.Response]:
    """`request` sent until it succeeds or its error is final (raised as its EngramError)."""
    attempt = 0
    while True:
        response: httpx.Response = yield request
        if response.is_success:
            return response
        wait = retries.wait(response, attempt)
        if wait is None:
            raise error_from(response)
        attempt += 1
        yield Pause(wait)


def executed(flow: Flow[T], retries: Retries) -> Flow[T]:
    """`flow` with each of its requests sent as `sent` sends it; an error is raised inside the flow, which may
    handle it (a name created meanwhile: agents.get_or_create)."""
    answer: Any = None
    while True:
        try:
            step = flow.throw(answer) if isinstance(answer, EngramError) else flow.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]  # a Flow[T]'s return value is a T
        if isinstance(step, Pause):
            answer = yield step
            continue
        try:
            answer = yield from sent(step, retries)
        except EngramError as error:
            answer = error


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    value: T


def advance(flow: Flow[T], answer: Any) -> Step | Done[T]:
    """The flow's next step, or its result."""
    try:
        return flow.send(answer)
    except StopIteration as done:
        return Done(done.value)


@dataclass(frozen=True)
class EventStream(Generic[T]):
    """A call answered with server-sent events: the flow that opens the stream (retried as any request until it
    opens), and how each event's data is read."""

    opening: Flow[httpx.Response]
    parse: Callable[[str], T]


def opened(request: Request) -> Flow[httpx.Response]:
    response: httpx.Response = yield request
    return response
