"""The Python client (clients/python, `engram_client`) against Engram served for real on a loopback port, its LLM
the scripted one: one service for the package's tests, a client per test that fails it on any 500."""

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from engram_client import Agent, AsyncEngram, Engram

from app.llm.embeddings import Embedder
from testkit.scripted_llm import ScriptedLLM
from tests.support.served import Served
from tests.support.service import scripted_settings


@pytest.fixture(scope="package")
def service(database_url: str, llm: ScriptedLLM, embedder: Embedder) -> Iterator[Served]:
    with Served(scripted_settings(database_url, llm, llm_timeout_seconds=30), embedder) as served:
        yield served


class Statuses(list[tuple[str, int]]):
    """Every answer a test's client got, as `METHOD path`, status."""

    def record(self, response: httpx.Response) -> None:
        self.append((f"{response.request.method} {response.request.url.path}", response.status_code))

    async def arecord(self, response: httpx.Response) -> None:
        self.record(response)

    def assert_no_500(self) -> None:
        assert not [entry for entry in self if entry[1] >= 500 and entry[1] not in (502, 503)], self


@pytest.fixture
def statuses(llm: ScriptedLLM) -> Iterator[Statuses]:
    llm.reset()
    seen = Statuses()
    yield seen
    seen.assert_no_500()


@pytest.fixture
def engram(service: Served, statuses: Statuses) -> Iterator[Engram]:
    with httpx.Client(timeout=30, event_hooks={"response": [statuses.record]}) as http:
        with Engram(service.url, http_client=http) as client:
            yield client


@pytest.fixture
async def aengram(service: Served, statuses: Statuses) -> AsyncIterator[AsyncEngram]:
    async with httpx.AsyncClient(timeout=30, event_hooks={"response": [statuses.arecord]}) as http:
        async with AsyncEngram(service.url, http_client=http) as client:
            yield client


def unique(name: str) -> str:
    """A name no other test uses (tests share one database, and names are unique per tenant)."""
    return f"{name} {uuid.uuid4().hex[:8]}"


@pytest.fixture
def agent(engram: Engram) -> Iterator[Agent]:
    created = engram.agents.create(unique("client test"))
    yield created
    engram.agents.delete(created.id)
