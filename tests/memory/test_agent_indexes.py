"""The largest agents get their own HNSW index (app/memory/search/agent_indexes.py): built in the background by the
service, used by their searches, dropped with the agent or when its build was cut short, one build at a time."""

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from pgserver.postgres_server import PostgresServer
from sqlalchemy import text

from app import db
from app.auth.models import DEFAULT_TENANT_ID
from app.llm.embeddings import Embedder
from app.main import create_app
from app.memory.kinds import TABLES
from app.memory.models import ArchivalPassage
from app.memory.search import agent_indexes, hybrid
from app.memory.search.agent_indexes import OwnIndexes, index_name, maintain_once
from app.memory.search.query import SearchQuery
from app.settings import E5_DIM
from testkit.scripted_llm import ScriptedLLM
from tests.support.database import build_own_indexes, create_database, plan_nodes, run_sql
from tests.support.service import checked_client, scripted_settings

SIZES = {"big": 2400, "mid": 2200, "small": 100}  # around INDEX_FROM: the planner must take the index there
QUERY = [float(d % 7) for d in range(E5_DIM)]
TABLE = "archival_passages"

FILL = f"""
WITH agent AS (
    INSERT INTO agents (id, tenant_id, name, context_start_seq, created_at, updated_at)
    VALUES (gen_random_uuid(), :tenant, :name, 0, now(), now()) RETURNING id
)
INSERT INTO archival_passages (id, agent_id, content, search_text, embedding, embedding_model, tags, created_at)
SELECT gen_random_uuid(), agent.id, 'passage ' || p, 'passag',
       (SELECT ('[' || string_agg(sin(p * 7 + d * 13 + length(:name))::text, ',') || ']')::vector
        FROM generate_series(1, {E5_DIM}) AS d),
       'synthetic', '{{}}', now()
FROM agent, generate_series(1, :rows) AS p
"""
GROW = f"""
INSERT INTO archival_passages (id, agent_id, content, search_text, embedding, embedding_model, tags, created_at)
SELECT gen_random_uuid(), :agent, 'more ' || p, 'more',
       (SELECT ('[' || string_agg(cos(p * 5 + d * 11)::text, ',') || ']')::vector FROM generate_series(1, {E5_DIM}) AS d),
       'synthetic', '{{}}', now()
FROM generate_series(1, :rows) AS p
"""


Agents = tuple[str, dict[str, uuid.UUID]]  # the database's URL, and its agents' ids by name


@pytest.fixture
def agents(postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agents]:
    """A fresh database with three agents of SIZES rows, all in one partition; at most one own index per partition."""
    url = create_database(postgres_server, f"engram_own_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM, partitions=1)
    for name, rows in SIZES.items():
        run_sql(url, FILL, {"tenant": DEFAULT_TENANT_ID, "name": name, "rows": rows})
    # no ANALYZE: as after a burst of writes, the table's statistics do not know the agents' rows yet
    monkeypatch.setattr(agent_indexes, "MAX_PER_PARTITION", 1)
    yield url, dict(run_sql(url, "SELECT name, id FROM agents"))


def own_indexes(url: str) -> set[str]:
    return {
        name
        for (name,) in run_sql(url, f"SELECT indexname FROM pg_indexes WHERE indexname ~ '^ix_{TABLE}_agent_[0-9a-f]{{32}}$'")
    }


def searched_through(url: str, agent_id: uuid.UUID, monkeypatch: pytest.MonkeyPatch, indexes: OwnIndexes) -> tuple[list, set]:
    """(the ids found, the indexes the plan read) of one hybrid search of the agent, with `indexes` as known."""
    monkeypatch.setattr(hybrid, "OWN_INDEXES", indexes)
    sql, params = hybrid.search_statement(ArchivalPassage, agent_id, SearchQuery("passage", k=10), QUERY)
    read = {node.get("Index Name") for node in plan_nodes(url, sql, params)} - {None}
    found = [row[0] for row in run_sql(url, sql, params)]
    return found, read


def test_the_largest_agent_gets_its_own_index_and_its_search_finds_the_same_rows_through_it(
    agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, ids = agents
    indexes = OwnIndexes()
    exact, read = searched_through(url, ids["big"], monkeypatch, indexes)
    assert index_name(TABLE, ids["big"]) not in read

    assert build_own_indexes(url, indexes) == [index_name(TABLE, ids["big"])]  # the cap: one, the largest
    assert indexes.has(TABLE, ids["big"]) and not indexes.has(TABLE, ids["mid"])
    found, read = searched_through(url, ids["big"], monkeypatch, indexes)
    assert index_name(TABLE, ids["big"]) in read
    assert found == exact
    assert build_own_indexes(url, indexes) == []  # nothing left to build within the cap

    monkeypatch.setattr(agent_indexes, "MAX_PER_PARTITION", 2)
    assert build_own_indexes(url, indexes) == [index_name(TABLE, ids["mid"])]  # never the small one: under INDEX_FROM
    assert own_indexes(url) == {index_name(TABLE, ids["big"]), index_name(TABLE, ids["mid"])}


def test_a_deleted_agents_index_is_dropped_and_a_build_cut_short_is_built_again(
    agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, ids = agents
    monkeypatch.setattr(agent_indexes, "MAX_PER_PARTITION", 2)
    indexes = OwnIndexes()
    build_own_indexes(url, indexes)
    big = index_name(TABLE, ids["big"])
    # what a build interrupted by a stop or a crash leaves behind
    run_sql(url, f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = CAST('{big}' AS regclass)")
    run_sql(url, "DELETE FROM agents WHERE id = :id", {"id": ids["mid"]})

    assert build_own_indexes(url, indexes) == [big]
    assert own_indexes(url) == {big}
    assert indexes.has(TABLE, ids["big"]) and not indexes.has(TABLE, ids["mid"])
    assert run_sql(url, f"SELECT indisvalid FROM pg_index WHERE indexrelid = CAST('{big}' AS regclass)") == [(True,)]


def test_a_round_builds_nothing_while_another_replica_holds_the_build_lock(agents: Agents) -> None:
    url, ids = agents

    async def run() -> tuple[list[str], list[str]]:
        engine = db.create_engine(url)
        try:
            async with engine.connect() as other:
                await other.execute(text("SELECT pg_advisory_lock(:space, :key)"), agent_indexes.BUILD_LOCK)
                locked_out = await maintain_once(engine, TABLES, OwnIndexes())
                await other.execute(text("SELECT pg_advisory_unlock(:space, :key)"), agent_indexes.BUILD_LOCK)
            return locked_out, await maintain_once(engine, TABLES, OwnIndexes())
        finally:
            await engine.dispose()

    locked_out, after = asyncio.run(run())
    assert locked_out == []
    assert after == [index_name(TABLE, ids["big"])]


def test_the_service_builds_the_index_of_an_agent_that_grows(
    postgres_server: PostgresServer, llm: ScriptedLLM, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = create_database(postgres_server, f"engram_grow_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM)
    monkeypatch.setattr(agent_indexes, "INDEX_FROM", 3)
    monkeypatch.setattr(agent_indexes, "ROUND_SECONDS", 0.2)
    with checked_client(create_app(scripted_settings(url, llm), embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "grows"}).json()
        for fact in ("I keep bees", "My sister lives in Osaka", "I play the oboe"):
            assert client.post(f"/v1/agents/{agent['id']}/archival", json={"content": fact}).status_code == 201
        deadline = time.monotonic() + 20
        while index_name(TABLE, uuid.UUID(agent["id"])) not in own_indexes(url) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert index_name(TABLE, uuid.UUID(agent["id"])) in own_indexes(url)
        deadline = time.monotonic() + 5  # the process learns of it in the round that built it
        while not agent_indexes.OWN_INDEXES.has(TABLE, uuid.UUID(agent["id"])) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert agent_indexes.OWN_INDEXES.has(TABLE, uuid.UUID(agent["id"]))
        hits = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "who plays an instrument?"}).json()
        assert [hit["content"] for hit in hits["items"]][0] == "I play the oboe"


def test_a_build_cut_short_by_a_stop_frees_the_lock_and_the_next_round_builds_it_whole(agents: Agents) -> None:
    url, ids = agents
    big = index_name(TABLE, ids["big"])

    async def run() -> list[str]:
        engine = db.create_engine(url)
        try:
            round_ = asyncio.create_task(maintain_once(engine, TABLES, OwnIndexes()))
            async with engine.connect() as watcher:  # in autocommit: a build waits for every open transaction
                watcher = await watcher.execution_options(isolation_level="AUTOCOMMIT")
                building = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%'"
                while not (await watcher.execute(text(building))).scalar():
                    await asyncio.sleep(0.01)
            round_.cancel()  # what the service's stop does to the background task
            with pytest.raises(asyncio.CancelledError):
                await round_
            for _ in range(100):  # the next round runs once the cut-short build has let go of the lock
                if built := await maintain_once(engine, TABLES, OwnIndexes()):
                    return built
                await asyncio.sleep(0.1)
            return []
        finally:
            await engine.dispose()

    assert asyncio.run(run()) == [big]
    assert run_sql(url, f"SELECT indisvalid FROM pg_index WHERE indexrelid = CAST('{big}' AS regclass)") == [(True,)]


def test_a_larger_agent_takes_the_place_of_the_smallest_when_the_cap_is_reached(agents: Agents) -> None:
    url, ids = agents
    indexes = OwnIndexes()
    assert build_own_indexes(url, indexes) == [index_name(TABLE, ids["big"])]  # the cap: one
    run_sql(url, GROW, {"agent": ids["mid"], "rows": SIZES["big"] - SIZES["mid"] + 100})  # mid outgrows big
    assert build_own_indexes(url, indexes) == [index_name(TABLE, ids["mid"])]
    assert own_indexes(url) == {index_name(TABLE, ids["mid"])}
    assert indexes.has(TABLE, ids["mid"]) and not indexes.has(TABLE, ids["big"])
