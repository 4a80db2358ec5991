"""How one definition of a call becomes a method of both clients: a call is written once, as a function that returns
its flow (or its event stream), and named in a resource class as `endpoint(function)`; read from `Engram`'s
resources it is a method that returns the result, from `AsyncEngram`'s one that returns a coroutine (a stream: an
iterator, or an async iterator). The signature, docstring and types are the function's, for both."""

from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Generic, ParamSpec, Self, TypeVar, overload

from engram_client._core import EventStream, Flow

P = ParamSpec("P")
T = TypeVar("T")


class Mode:
    """Whether a resource's methods block (Sync) or are awaited (Async): a type parameter only."""


class Sync(Mode):
    pass


class Async(Mode):
    pass


M = TypeVar("M", bound=Mode)


class Runner(Generic[M]):
    """What runs the calls of a client's resources (_runners.py): `bind` makes a call's function a method."""

    def bind(self, build: Callable[..., Any]) -> Callable[..., Any]:
        raise NotImplementedError

    def bind_stream(self, build: Callable[..., Any]) -> Callable[..., Any]:
        raise NotImplementedError


class Resource(Generic[M]):
    """A group of calls (`client.agents`, `client.archival`…), run by the client's runner."""

    def __init__(self, runner: Runner[M]) -> None:
        self._runner = runner


class _Method:
    """A call declared in a resource class; what reading it gives is the runner's `binder` of the call."""

    binder = "bind"

    def __init__(self, build: Callable[..., Any]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def _method(self, resource: Resource[Any]) -> Any:
        method = resource.__dict__[self.name] = getattr(resource._runner, self.binder)(self.build)  # once per client
        return method


class endpoint(_Method, Generic[P, T]):  # noqa: N801  (a declaration, as property is)
    def __init__(self, build: Callable[P, Flow[T]]) -> None:
        super().__init__(build)

    @overload
    def __get__(self, resource: None, owner: type) -> Self: ...
    @overload
    def __get__(self, resource: Resource[Sync], owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, resource: Resource[Async], owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, resource: Resource[Any] | None, owner: type) -> Any:
        return self if resource is None else self._method(resource)


class stream(_Method, Generic[P, T]):  # noqa: N801
    binder = "bind_stream"

    def __init__(self, build: Callable[P, EventStream[T]]) -> None:
        super().__init__(build)

    @overload
    def __get__(self, resource: None, owner: type) -> Self: ...
    @overload
    def __get__(self, resource: Resource[Sync], owner: type) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, resource: Resource[Async], owner: type) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, resource: Resource[Any] | None, owner: type) -> Any:
        return self if resource is None else self._method(resource)
