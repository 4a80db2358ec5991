"""Moving a database to another embedder: a database of the MiniLM era is refused at start-up with the way out,
`engram reembed` converts it with a progress bar, and a run that stops half-way loses nothing and resumes."""

import asyncio
import random
import subprocess
import sys
import uuid
from collections.abc import Sequence

import pytest
from pgserver.postgres_server import PostgresServer
from sqlalchemy import text

from app import db
from app.auth.models import DEFAULT_TENANT_ID
from app.llm.embeddings import Embedder
from app.llm.embeddings.space import EmbeddingSpaceMismatch
from app.main import create_app
from app.memory.reembed import reembed
from app.memory.search import lexical
from app.settings import E5_DIM, Settings
from tests.support.database import create_database
from tests.support.service import checked_client

PASSAGES = ["The user's cat is called Mochi", "ユーザーの夫は看護師で、夜勤が多い", "Dentist on Thursday afternoon"]
MESSAGES = ["I moved to Osaka last spring", "週末は鎌倉で釣りをします"]


def legacy_database(
    server: PostgresServer, passages: Sequence[str] = PASSAGES, messages: Sequence[str] = MESSAGES
) -> tuple[str, str]:
    """A database as Engram left it before it recorded embedding models (migration 0003), with MiniLM-era rows:
    passages named all-MiniLM-L6-v2, messages with vectors and no model. Returns (url, agent id)."""
    url = create_database(server, f"engram_legacy_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM, revision="0003_bm25")
    agent_id = str(uuid.uuid4())
    rng = random.Random(7)

    def vector() -> str:
        return str([rng.uniform(-1, 1) for _ in range(E5_DIM)])

    async def fill() -> None:
        engine = db.create_engine(url)
        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO agents (id, tenant_id, name) VALUES (:id, :tenant, 'from 2025')"),
                {"id": agent_id, "tenant": DEFAULT_TENANT_ID},
            )
            for content in passages:
                await conn.execute(
                    text(
                        "INSERT INTO archival_passages (id, agent_id, content, embedding, embedding_model, search_text) "
                        "VALUES (:id, :agent, :content, CAST(:v AS vector), 'all-MiniLM-L6-v2', :st)"
                    ),
                    {
                        "id": uuid.uuid4(),
                        "agent": agent_id,
                        "content": content,
                        "v": vector(),
                        "st": lexical.search_text(content),
                    },
                )
            for content in messages:
                await conn.execute(
                    text(
                        "INSERT INTO messages (id, agent_id, role, content, embedding, search_text) "
                        "VALUES (:id, :agent, 'user', :content, CAST(:v AS vector), :st)"
                    ),
                    {
                        "id": uuid.uuid4(),
                        "agent": agent_id,
                        "content": content,
                        "v": vector(),
                        "st": lexical.search_text(content),
                    },
                )
        await engine.dispose()

    asyncio.run(fill())
    return url, agent_id


def rows(url: str) -> dict[str, list[tuple[str, str | None]]]:
    """(content, embedding model) of every passage and message."""

    async def read() -> dict[str, list[tuple[str, str | None]]]:
        engine = db.create_engine(url)
        async with engine.connect() as conn:
            out = {
                t: [
                    tuple(r)
                    for r in (await conn.execute(text(f"SELECT content, embedding_model FROM {t} ORDER BY content"))).all()
                ]
                for t in ("archival_passages", "messages")
            }
        await engine.dispose()
        return out

    return asyncio.run(read())


def test_a_minilm_database_is_refused_then_converted_by_engram_reembed(
    postgres_server: PostgresServer, embedder: Embedder
) -> None:
    url, agent_id = legacy_database(postgres_server)
    with pytest.raises(
        EmbeddingSpaceMismatch, match=r"made by all-MiniLM-L6-v2 \(384 dims\).*multilingual-e5-small-q4.*`engram reembed`"
    ):
        with checked_client(create_app(Settings(database_url=url), embedder=embedder)):
            pass

    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "reembed"],
        env={"DATABASE_URL": url, "PATH": "/usr/bin:/bin", "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "re-embedded 3 passages and 2 messages with multilingual-e5-small-q4" in result.stdout
    assert "re-embedding with multilingual-e5-small-q4" in result.stdout and "5/5" in result.stdout  # the progress bar
    after = rows(url)
    assert [c for c, _ in after["archival_passages"]] == sorted(PASSAGES) and {m for _, m in after["archival_passages"]} == {
        "multilingual-e5-small-q4"
    }
    assert [c for c, _ in after["messages"]] == sorted(MESSAGES) and {m for _, m in after["messages"]} == {
        "multilingual-e5-small-q4"
    }

    with checked_client(create_app(Settings(database_url=url), embedder=embedder)) as client:
        # Vector-only search: no word shared, so only the new vectors can find it.
        hits = client.get(
            f"/v1/agents/{agent_id}/archival", params={"query": "パートナーの職業は？", "mode": "vector", "k": 1}
        ).json()["items"]
        assert hits[0]["content"] == PASSAGES[1]
        recalled = client.get(
            f"/v1/agents/{agent_id}/messages", params={"query": "What do I do on weekends?", "include_context": "true"}
        )
        assert recalled.json()["items"][0]["content"] == MESSAGES[1]


class FailingAfter:
    """The real embedder, failing from its n-th call on: a run that dies half-way (a crash, a lost endpoint)."""

    def __init__(self, inner: Embedder, calls: int):
        self.inner, self.model, self.dim, self.symmetric, self.calls = inner, inner.model, inner.dim, inner.symmetric, calls

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls -= 1
        if self.calls < 0:
            raise ConnectionError("the embedder went away")
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)


def test_an_interrupted_reembed_loses_nothing_and_resumes(postgres_server: PostgresServer, embedder: Embedder) -> None:
    passages = [f"note {i}: the user planted {i} tulips" for i in range(7)]
    url, agent_id = legacy_database(postgres_server, passages=passages, messages=["hello from the past"])
    db.run_migrations(url, E5_DIM)  # as `engram reembed` does first

    async def run(e: Embedder) -> tuple[int, int]:
        engine = db.create_engine(url)
        try:
            done = await reembed(engine, e, batch=2)
            return done.rows["archival"], done.rows["recall"]
        finally:
            await engine.dispose()

    with pytest.raises(ConnectionError):
        asyncio.run(run(FailingAfter(embedder, calls=2)))
    half = rows(url)
    assert [c for c, _ in half["archival_passages"]] == sorted(passages)  # every passage still there
    assert sum(m == embedder.model for _, m in half["archival_passages"]) == 4  # two committed batches of two
    with pytest.raises(EmbeddingSpaceMismatch, match="did not finish.*run `engram reembed` again"):
        with checked_client(create_app(Settings(database_url=url), embedder=embedder)):
            pass

    assert asyncio.run(run(embedder)) == (3, 1)  # only what was left
    assert asyncio.run(run(embedder)) == (0, 0)  # and then nothing
    done = rows(url)
    assert {m for _, m in done["archival_passages"] + done["messages"]} == {embedder.model}
    with checked_client(create_app(Settings(database_url=url), embedder=embedder)) as client:
        hits = client.get(f"/v1/agents/{agent_id}/archival", params={"query": "how many tulips in note 5", "k": 1}).json()[
            "items"
        ]
        assert hits[0]["content"] == passages[5]
