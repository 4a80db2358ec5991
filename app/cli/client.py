"""The HTTP side of the client commands: where the server is (ENGRAM_URL), the key (ENGRAM_API_KEY or --key), and
its errors turned into one line on stderr and exit status 1."""

import argparse
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT = httpx.Timeout(120.0, connect=10.0)


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=os.environ.get("ENGRAM_URL") or DEFAULT_URL, help=f"the server (default: $ENGRAM_URL or {DEFAULT_URL})"
    )
    parser.add_argument("--key", default=os.environ.get("ENGRAM_API_KEY") or None, help="API key (default: $ENGRAM_API_KEY)")


class Api:
    def __init__(self, http: httpx.Client, url: str):
        self.http, self.url = http, url

    def request(self, method: str, path: str, *, ok: tuple[int, ...] = (), **kwargs: Any) -> httpx.Response:
        """The response; an error status (other than those in `ok`) ends the command with the server's reason."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from None
        if response.status_code >= 400 and response.status_code not in ok:
            raise failure(response)
        return response

    @contextmanager
    def stream(self, method: str, path: str, **kwargs: Any) -> Iterator[httpx.Response]:
        with self._reaching():
            with self.http.stream(method, path, **kwargs) as response:
                yield _succeeded(response)

    @contextmanager
    def events(self, method: str, path: str, **kwargs: Any) -> Iterator[Iterator[ServerSentEvent]]:
        """The server-sent events of a streamed answer (httpx-sse asks for them and reads them)."""
        with self._reaching():
            with connect_sse(self.http, method, path, **kwargs) as source:
                _succeeded(source.response)
                yield source.iter_sse()

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        try:
            yield
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from None

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise SystemExit(
                f"engram: {self.url} answered {path} with something other than JSON; is it an Engram server (ENGRAM_URL)?"
            ) from None

    def unreachable(self, exc: Exception) -> SystemExit:
        return SystemExit(
            f"engram: cannot reach the server at {self.url} ({exc}); start it with `engram serve` or set ENGRAM_URL"
        )

    def agents(self) -> list[dict[str, Any]]:
        found, cursor = [], None
        while True:
            page = self.json("GET", "/v1/agents", params={"limit": 200, **({"cursor": cursor} if cursor else {})})
            found += page["items"]
            if not (cursor := page.get("next_cursor")):
                return found

    def agent(self, reference: str) -> dict[str, Any]:
        """An agent by its id or its name."""
        try:
            agent_id = uuid.UUID(reference)
        except ValueError:
            agent_id = None
        if agent_id is not None:
            agent: dict[str, Any] = self.json("GET", f"/v1/agents/{agent_id}")
            return agent
        named = [a for a in self.agents() if a["name"] == reference]
        if not named:
            raise SystemExit(f"engram: no agent with the id or name {reference!r} (see `engram agents ls`)")
        if len(named) > 1:
            raise SystemExit(f"engram: {len(named)} agents are named {reference!r}; use an id (see `engram agents ls`)")
        return named[0]


def _succeeded(streamed: httpx.Response) -> httpx.Response:
    """A streamed response; an error status ends the command with the server's reason."""
    if streamed.status_code >= 400:
        streamed.read()
        raise failure(streamed)
    return streamed


def failure(response: httpx.Response) -> SystemExit:
    try:
        body = response.json()
        reason = f"{body['error']}: {body['detail']}"
    except (ValueError, KeyError, TypeError):
        reason = response.text[:500] or response.reason_phrase
    one_line = " ".join(reason.split())  # an HTML error page, say
    if response.status_code == 401:  # the server speaks of headers; the user of this command gives a flag
        one_line += " (give the key with --key or ENGRAM_API_KEY; `engram keys create` issues one)"
    return SystemExit(f"engram: the server answered {response.status_code} {one_line}")


@contextmanager
def connect(args: argparse.Namespace) -> Iterator[Api]:
    headers = {"Authorization": f"Bearer {args.key}"} if args.key else {}
    with httpx.Client(base_url=args.url, headers=headers, timeout=TIMEOUT) as http:
        yield Api(http, args.url)
