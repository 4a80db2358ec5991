"""What one search may cost as an agent's memory grows: the lexical candidates come from the rarest query terms
while their rows stay within a budget (app/memory/search/hybrid.py PROBE_ROWS), so a query of common words does not make
the search read most of a large agent's rows. Checked with the real statement, on a real PostgreSQL."""

import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.memory.models import ArchivalPassage
from app.memory.search import bm25, hybrid
from app.memory.search.query import SearchQuery
from app.settings import E5_DIM
from tests.support.database import agent_beside, analyze, index_parts, plan_nodes, plan_subtree, run_sql

# Terms and how many passages hold each: the rarest three hold 1,500 rows, the fourth would make 2,400.
DOCUMENT_FREQUENCIES = {"alpha": 300, "bravo": 500, "echo": 700, "delta": 900}


def test_lexical_candidates_come_from_the_rarest_terms_within_the_row_budget(
    client: TestClient, agent: dict, database_url: str
) -> None:
    agent_id = uuid.UUID(agent["id"])
    for term, count in DOCUMENT_FREQUENCIES.items():
        store(
            database_url,
            agent_id,
            f"SELECT CAST(:term AS text) || ' note ' || i FROM generate_series(1, {count}) AS i",
            {"term": term},
        )
    assert bm25.PROBE_ROWS == 1000
    query = SearchQuery(" ".join(DOCUMENT_FREQUENCIES), k=10, mode="text")
    sql, params = hybrid.search_statement(ArchivalPassage, agent_id, query, [0.05] * E5_DIM)
    # The statement's own CTEs, asked how many rows its lexical side matched.
    matched = sql[: sql.index(", top AS (")] + "\nSELECT count(*) FROM matches"
    # alpha, bravo (300 rarer rows) and echo (800) find candidates; delta (1,500 rarer rows) only scores them.
    assert run_sql(database_url, matched, params) == [(1500,)]

    found = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "alpha delta", "k": 5, "mode": "text"})
    assert found.status_code == 200
    # The rare term still ranks first: a row holding it is a candidate, and scored on every query term.
    assert all(item["content"].startswith("alpha") for item in found.json()["items"])


def test_a_short_passage_stays_whole_in_its_row(client: TestClient, agent: dict, database_url: str) -> None:
    """With its 1.5 kB vector, a few hundred characters of text pass PostgreSQL's default 2 kB threshold, which would
    compress the text and its lexemes (every candidate's BM25 then reads them back); under 4 kB they stay as written."""
    line = "We walked along the river to the old mill and talked about the summer. " * 8
    created = client.post(f"/v1/agents/{agent['id']}/archival", json={"content": line})
    assert created.status_code == 201
    [(row_bytes, *compressed)] = run_sql(
        database_url,
        "SELECT pg_column_size(p.*), pg_column_compression(content), pg_column_compression(search_text),"
        " pg_column_compression(tsv) FROM archival_passages p WHERE id = :id",
        {"id": uuid.UUID(created.json()["id"])},
    )
    assert 2100 < row_bytes < 4080
    assert compressed == [None, None, None]


def test_the_query_vector_reaches_postgresql_unchanged(database_url: str) -> None:
    """The search sends its vector as text with 9 significant digits (half the cost of `str()` of the list): enough
    for every float4 pgvector stores to come back bit for bit."""
    vector = np.random.default_rng(7).standard_normal(E5_DIM).astype(np.float32)
    vector[:4] = [1e-12, -3.4e38, 1.17549435e-38, 0.1]  # tiny, huge, smallest normal, inexact in binary
    [(stored,)] = run_sql(
        database_url, "SELECT CAST(CAST(:v AS vector) AS real[])", {"v": hybrid.vector_literal(vector.tolist())}
    )
    assert np.array_equal(np.asarray(stored, dtype=np.float32), vector)


def test_past_the_match_cap_the_rows_kept_are_the_best_ranked(
    client: TestClient, agent: dict, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BM25 scores at most MAX_LEXICAL_MATCHES rows, those with the best ts_rank; under the cap every matching row
    is kept. The cap counts the rows the text index matched, not the term's document frequency: "alpha-x" holds the
    lexeme alpha (PostgreSQL splits the hyphenated word) but not the token, so the frequency (5) undercounts the
    matches (35). Such a row has no count for the term, and no BM25 (not NULL, which would sort first)."""
    agent_id = uuid.UUID(agent["id"])
    for line, count in (("alpha-x note", 30), ("alpha alpha alpha note", 5)):
        store(database_url, agent_id, f"SELECT CAST(:line AS text) FROM generate_series(1, {count})", {"line": line})

    def ctes(cap: int, query: str) -> list[tuple]:
        monkeypatch.setattr(bm25, "MAX_LEXICAL_MATCHES", cap)
        hybrid._sql.cache_clear()
        try:
            sql, params = hybrid.search_statement(
                ArchivalPassage, agent_id, SearchQuery("alpha", k=10, mode="text"), [0.05] * E5_DIM
            )
        finally:
            hybrid._sql.cache_clear()
        return run_sql(database_url, sql[: sql.index(", top AS (")] + "\n" + query, params)

    matched = "SELECT p.search_text FROM matches m JOIN archival_passages p USING (id)"
    assert len(ctes(100, matched)) == 35
    best = ctes(8, matched)
    assert len(best) == 8
    assert sorted(best).count(("alpha alpha alpha note",)) == 5
    assert ctes(100, "SELECT count(*), count(score) FROM bm25") == [(5, 5)]


def test_the_candidate_lists_meet_without_comparing_every_pair(client: TestClient, agent: dict, database_url: str) -> None:
    """The vector and lexical candidates (100 each, here 300 with a BM25 score) come together by grouping on the
    row: the planner, which guesses a row or two per list, once joined them in a nested loop that compared every
    vector candidate with every scored row (53,571 comparisons here; 48,300 on a LoCoMo agent, 40 % of the search)."""
    agent_id = uuid.UUID(agent["id"])
    store(database_url, agent_id, alpha_or_bravo(every=2, rows=600))
    analyze(database_url, "archival_passages")
    sql, params = hybrid.search_statement(ArchivalPassage, agent_id, SearchQuery("alpha", k=10), [0.05] * E5_DIM)
    compared = sum(node.get("Rows Removed by Join Filter", 0) for node in plan_nodes(database_url, sql, params))
    assert compared < 1000


def test_the_lexical_candidates_are_found_through_the_text_index_alone(
    client: TestClient, agent: dict, database_url: str
) -> None:
    """The full-text index finds an agent's candidates by itself (the agent is a term of its entries): asked for the
    agent's `agent_id` too, the planner intersected them with every row of the agent from the btree — 100,000 entries
    read for a 100,000-passage agent's search (bench/ARCHIVE.md, item 5). Here the agent is a quarter of its
    partition (the tables are partitioned by agent)."""
    agent_id = uuid.UUID(agent["id"])
    neighbour = agent_beside(database_url, agent_id, f"neighbour {uuid.uuid4().hex[:8]}")
    for owner, rows in ((agent_id, 5000), (neighbour, 20000)):
        store(database_url, owner, alpha_or_bravo(every=50, rows=rows))
    analyze(database_url, "archival_passages")
    sql, params = hybrid.search_statement(ArchivalPassage, agent_id, SearchQuery("alpha", k=10), [0.05] * E5_DIM)
    [bm25] = [node for node in plan_nodes(database_url, sql, params) if node.get("Subplan Name") == "CTE bm25"]
    indexes = {node.get("Index Name") for node in plan_subtree(bm25)} - {None}
    assert indexes and indexes <= index_parts(database_url, "ix_archival_passages_agent_tsv")


def store(database_url: str, agent_id: uuid.UUID, lines: str, params: dict | None = None) -> None:
    """A passage of the agent for each row of `lines` (SQL of one text column, its text and search text), all with
    the same vector, in one statement."""
    run_sql(
        database_url,
        f"""
        INSERT INTO archival_passages (id, agent_id, content, tags, embedding, embedding_model, search_text, created_at, occurred_at)
        SELECT gen_random_uuid(), :agent_id, line, '{{}}', CAST(array_fill(0.05, ARRAY[{E5_DIM}]) AS vector), 'test', line, now(), now()
        FROM ({lines}) AS lines(line)""",
        {"agent_id": agent_id, **(params or {})},
    )


def alpha_or_bravo(*, every: int, rows: int) -> str:
    """`rows` numbered lines, one in `every` about alpha, the others about bravo."""
    return f"SELECT CASE WHEN i % {every} = 0 THEN 'alpha note ' ELSE 'bravo note ' END || i FROM generate_series(1, {rows}) AS i"
