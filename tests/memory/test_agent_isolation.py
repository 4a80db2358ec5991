"""At 1,000 agents sharing the tables, an agent's search returns only its own rows — through both routes of the
hybrid statement's vector side (an exact scan, or the agent's own HNSW index), with every other agent's rows
as close to the query as its own — and its text side reads only its own rows from the full-text index."""

import asyncio
import uuid

import pytest
from pgserver.postgres_server import PostgresServer

from app import db
from app.auth.models import DEFAULT_TENANT_ID
from app.memory.archival.repository import PassageRepository
from app.memory.models import ArchivalPassage
from app.memory.search import agent_indexes, hybrid
from app.memory.search.agent_indexes import OwnIndexes
from app.memory.search.query import SearchQuery
from app.settings import E5_DIM
from tests.support.database import build_own_indexes, create_database, index_parts, plan_nodes, run_sql

AGENTS = 1000
TABLE = "archival_passages"
PASSAGES_PER_AGENT = 12
K = 10

# Every passage shares the words "shared memory" (stored as their lexical tokens, "share memori", as the service
# stores them); agent n's also hold "agentN". Vectors: one common direction plus
# a small per-passage wobble, so every row of every agent is near the query.
FILL = f"""
WITH agents AS (
    INSERT INTO agents (id, tenant_id, name, context_start_seq, created_at, updated_at)
    SELECT gen_random_uuid(), :tenant, 'crowd ' || n, 0, now(), now() FROM generate_series(1, {AGENTS}) AS n
    RETURNING id, name
)
INSERT INTO archival_passages (id, agent_id, content, search_text, embedding, embedding_model, tags, created_at)
SELECT gen_random_uuid(), a.id, 'shared memory ' || a.name, 'share memori agent' || split_part(a.name, ' ', 2),
       (SELECT ('[' || string_agg((1 + 0.05 * sin(p * 7 + d * 13 + length(a.name)))::text, ',') || ']')::vector
        FROM generate_series(1, {E5_DIM}) AS d),
       'synthetic', '{{}}', now()
FROM agents a, generate_series(1, {PASSAGES_PER_AGENT}) AS p
"""


@pytest.fixture(scope="module")
def crowded_database(postgres_server: PostgresServer) -> str:
    url = create_database(postgres_server, f"engram_crowd_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM)
    run_sql(url, FILL, {"tenant": DEFAULT_TENANT_ID})
    run_sql(url, "ANALYZE")
    return url


def foreign_hits(url: str, agents: list[tuple[uuid.UUID, str]]) -> tuple[int, int]:
    """(rows of another agent returned, searches that came back short of K) over one search per agent, each
    asking for its own rows' common words and another agent's marker word."""
    query = [1.0] * E5_DIM

    async def run() -> tuple[int, int]:
        engine = db.create_engine(url)
        sessions = db.session_factory(engine)
        foreign = short = 0
        try:
            for i, (agent_id, _) in enumerate(agents):
                bait = agents[(i + 1) % len(agents)][1]
                async with sessions() as session:
                    matches = await PassageRepository(session).hybrid_search(
                        agent_id, SearchQuery(f"shared memory agent{bait}", k=K), query
                    )
                foreign += sum(p.agent_id != agent_id for p, _ in matches)
                short += len(matches) < K
        finally:
            await engine.dispose()
        return foreign, short

    return asyncio.run(run())


@pytest.mark.parametrize("route", ["an exact scan", "the agent's own index"])
def test_search_never_returns_another_agents_rows(crowded_database: str, route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = run_sql(crowded_database, "SELECT id, split_part(name, ' ', 2) FROM agents WHERE name LIKE 'crowd %'")
    assert len(rows) == AGENTS
    if route.endswith("own index"):
        monkeypatch.setattr(agent_indexes, "INDEX_FROM", PASSAGES_PER_AGENT)
        monkeypatch.setattr(agent_indexes, "MAX_PER_PARTITION", 2)
        indexes = OwnIndexes()
        built = build_own_indexes(crowded_database, indexes)
        [(partitions,)] = run_sql(crowded_database, f"SELECT count(*) FROM pg_inherits WHERE inhparent = '{TABLE}'::regclass")
        assert len(built) == 2 * partitions  # the cap is per partition
        monkeypatch.setattr(hybrid, "OWN_INDEXES", indexes)
        rows = [(agent_id, n) for agent_id, n in rows if indexes.has(TABLE, agent_id)]
        assert len(rows) == 2 * partitions
    foreign, short = foreign_hits(crowded_database, rows)
    assert foreign == 0
    assert short == 0  # each agent finds K of its own rows: the filter is not hiding a failed search


def test_text_index_returns_only_the_agents_own_rows(crowded_database: str) -> None:
    """ "shared" is in all 12,000 rows; the index, asked for the term and the agent, gives back the agent's 12 (from
    the part on the agent's partition: the others hold no row of the agent)."""
    [(agent_id,)] = run_sql(crowded_database, "SELECT id FROM agents WHERE name = 'crowd 7'")
    sql, params = hybrid.search_statement(ArchivalPassage, agent_id, SearchQuery("shared", k=K, mode="text"), [1.0] * E5_DIM)
    nodes = plan_nodes(crowded_database, sql, params)
    parts = index_parts(crowded_database, "ix_archival_passages_agent_tsv")
    text_scans = [node for node in nodes if node.get("Index Name") in parts]
    assert sorted(node["Actual Rows"] for node in text_scans if node["Actual Rows"]) == [PASSAGES_PER_AGENT]
