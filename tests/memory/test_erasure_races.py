"""Erasure (app/memory/archival/erasure.py) against a write that cites what it erases, in two services on one database: the
writer holds its checked sources (locked FOR KEY SHARE, repository.source_times) while it embeds, and the erasure
waits for it. Neither fails, and what the writer stored goes with what it was drawn from."""

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from tests.memory.test_erasure import SAID, drawn, passage, said
from tests.support.database import run_sql
from tests.support.service import checked_client

CITING = "The user's family includes a nurse."


class HeldWrites:
    """The test's embedder, which holds the embedding of CITING until `go` is set (`embedding` tells it has begun):
    the write that asked for it has checked its sources, and holds them locked."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner, self.embedding, self.go = embedder, threading.Event(), threading.Event()
        self.model, self.dim, self.symmetric = embedder.model, embedder.dim, embedder.symmetric

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if CITING in texts:
            self.embedding.set()
            while not self.go.is_set():
                await asyncio.sleep(0.01)
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)


@contextmanager
def held_writer(settings: Settings, embedder: Embedder) -> Iterator[tuple[TestClient, HeldWrites]]:
    """A second service on the database, whose writes of CITING wait in the embedder."""
    held = HeldWrites(embedder)
    with checked_client(create_app(settings, embedder=held)) as writer:
        try:
            yield writer, held
        finally:
            held.go.set()  # a test that failed meanwhile leaves no request waiting


def waiting_on_a_lock(database_url: str, table: str) -> None:
    """Until a session waits for a row lock in a statement on `table` (the erasure, for the writer's)."""
    deadline = time.monotonic() + 10
    query = """
        SELECT count(*) FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ~ ('(FROM|UPDATE) ' || :table || ' ')
    """
    while run_sql(database_url, query, {"table": table}) == [(0,)]:
        assert time.monotonic() < deadline, f"nothing waits for a lock on {table}"
        time.sleep(0.02)


def test_forgetting_a_message_while_a_fact_citing_it_is_written_takes_the_fact_along(
    client: TestClient, agent: dict, settings: Settings, embedder: Embedder, database_url: str
) -> None:
    """The forgetting waits for the writer's lock on the message; the writer's insert takes a key-share lock on the
    agent (its foreign key), which the forgetting's lock on the agent must not block: that was a deadlock, a 500."""
    [yuki] = said(client, agent, SAID)
    with ThreadPoolExecutor(2) as pool, held_writer(settings, embedder) as (writer, held):
        storing = pool.submit(writer.post, f"/v1/agents/{agent['id']}/archival", json={"content": CITING, "sources": [yuki]})
        assert held.embedding.wait(10)
        forgetting = pool.submit(client.delete, f"/v1/agents/{agent['id']}/messages/{yuki}")
        waiting_on_a_lock(database_url, "messages")
        held.go.set()
        stored, forgotten = storing.result(), forgetting.result()
    assert stored.status_code == 201, stored.text
    assert forgotten.status_code == 200, forgotten.text
    assert forgotten.json()["erased_passages"] == [stored.json()["id"]]
    assert passage(client, agent, stored.json()["id"]) is None


def test_a_fact_citing_a_derived_passage_written_during_the_erasure_goes_with_it(
    client: TestClient, agent: dict, settings: Settings, embedder: Embedder, database_url: str
) -> None:
    """The erasure finds what goes before the writer commits (the fact drawn from the message, not the one citing
    that fact), and deletes it once the writer has: what the writer stored, drawn from it alone, goes too."""
    [yuki] = said(client, agent, SAID)
    fact = drawn(client, agent, "The user's sister Yuki is a nurse.", yuki)
    with ThreadPoolExecutor(2) as pool, held_writer(settings, embedder) as (writer, held):
        storing = pool.submit(writer.post, f"/v1/agents/{agent['id']}/archival", json={"content": CITING, "sources": [fact]})
        assert held.embedding.wait(10)
        forgetting = pool.submit(client.delete, f"/v1/agents/{agent['id']}/messages/{yuki}")
        waiting_on_a_lock(database_url, "archival_passages")
        held.go.set()
        stored, forgotten = storing.result(), forgetting.result()
    assert stored.status_code == 201, stored.text
    assert forgotten.status_code == 200, forgotten.text
    citing = stored.json()["id"]
    assert sorted(forgotten.json()["erased_passages"]) == sorted([fact, citing])
    assert forgotten.json()["sources_trimmed"] == 0
    assert passage(client, agent, citing) is None
