"""The BM25 statistics kept on write (row triggers, migration 0017) always equal what a full count over the rows
gives: after inserts, deletes, changed text, turns, concurrent writers, and the deletion of the agent."""

import asyncio
import uuid
from collections import Counter

from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import db
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.chat import chat
from tests.support.database import run_sql

RECOUNT = {
    "corpus": """
        SELECT count(*), coalesce(sum(token_count), 0) FROM {table} WHERE agent_id = :a AND search_text <> ''""",
    "terms": """
        SELECT w.term, count(DISTINCT t.id) FROM {table} t, unnest(string_to_array(t.search_text, ' ')) AS w(term)
        WHERE t.agent_id = :a AND t.search_text <> '' GROUP BY w.term""",
}
KEPT = {
    "corpus": "SELECT docs, tokens FROM lexical_corpus WHERE agent_id = :a AND source = '{table}'",
    "terms": "SELECT term, df FROM lexical_terms WHERE agent_id = :a AND source = '{table}'",
}


def statistics(database_url: str, agent_id: str, table: str) -> tuple[dict, dict]:
    """(kept, recounted) for one agent's table."""
    out = []
    for queries in (KEPT, RECOUNT):
        corpus = run_sql(database_url, queries["corpus"].format(table=table), {"a": uuid.UUID(agent_id)})
        terms = run_sql(database_url, queries["terms"].format(table=table), {"a": uuid.UUID(agent_id)})
        docs = corpus[0] if corpus else (0, 0)
        out.append({"corpus": docs if docs != (0, 0) else None, "terms": dict(terms)})
    return out[0], out[1]


def assert_in_step(database_url: str, agent_id: str, table: str) -> dict:
    kept, recounted = statistics(database_url, agent_id, table)
    assert kept == recounted
    return kept


def test_archival_statistics_follow_every_write(client: TestClient, agent: dict, database_url: str) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    batch = client.post(
        f"{base}/batch",
        json={"items": [{"content": "Ken climbs mountains"}, {"content": "Ken 山登りが好き"}, {"content": "tea, tea and tea"}]},
    )
    assert batch.status_code == 201
    kept = assert_in_step(database_url, agent["id"], "archival_passages")
    assert kept["corpus"][0] == 3 and kept["terms"]["ken"] == 2 and kept["terms"]["tea"] == 1
    client.post(base, json={"content": "Ken again"})
    assert assert_in_step(database_url, agent["id"], "archival_passages")["terms"]["ken"] == 3
    for passage in batch.json()["items"][:2]:
        assert client.delete(f"{base}/{passage['id']}").status_code == 200
    kept = assert_in_step(database_url, agent["id"], "archival_passages")
    assert kept["corpus"][0] == 2 and kept["terms"]["ken"] == 1 and "mountain" not in kept["terms"]
    # Changed text moves the statistics; an update that leaves the text alone (re-embedding) does not.
    tea = uuid.UUID(batch.json()["items"][2]["id"])
    run_sql(database_url, "UPDATE archival_passages SET search_text = 'green tea' WHERE id = :id", {"id": tea})
    assert assert_in_step(database_url, agent["id"], "archival_passages")["terms"]["green"] == 1
    run_sql(
        database_url, "UPDATE archival_passages SET embedding_model = 'other' WHERE agent_id = :a", {"a": uuid.UUID(agent["id"])}
    )
    assert_in_step(database_url, agent["id"], "archival_passages")
    assert client.delete(f"/v1/agents/{agent['id']}").status_code == 204
    kept, _ = statistics(database_url, agent["id"], "archival_passages")
    assert kept == {"corpus": None, "terms": {}}


def test_recall_statistics_follow_turns(client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str) -> None:
    llm.reset(tools(call("send_message", text="Kyoto in autumn is lovely")))
    chat(client, agent, "Tell me about Kyoto")
    kept = assert_in_step(database_url, agent["id"], "messages")
    assert kept["terms"]["kyoto"] == 2  # the user's message and the assistant's call carry it; the tool result not


def test_each_row_keeps_its_term_counts(client: TestClient, agent: dict, database_url: str) -> None:
    # BM25's term frequencies are read from `term_counts` (migration 0013): they must be the counts of `search_text`.
    items = [{"content": "tea, tea and green tea"}, {"content": "お茶とお茶"}, {"content": "?!"}]
    assert client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": items}).status_code == 201
    rows = "SELECT search_text, term_counts FROM archival_passages WHERE agent_id = :a"
    stored = run_sql(database_url, rows, {"a": uuid.UUID(agent["id"])})
    assert len(stored) == 3
    for search_text, term_counts in stored:
        assert term_counts == dict(Counter(search_text.split())), search_text
    assert {"tea": 3, "green": 1} in [counts for _, counts in stored]
    # A changed text changes its counts.
    run_sql(
        database_url,
        "UPDATE archival_passages SET search_text = 'tea tea' WHERE agent_id = :a AND search_text = ''",
        {"a": uuid.UUID(agent["id"])},
    )
    assert {"tea": 2} in [counts for _, counts in run_sql(database_url, rows, {"a": uuid.UUID(agent["id"])})]


def test_concurrent_writers_to_one_agent_keep_the_statistics_without_deadlock(agent: dict, database_url: str) -> None:
    """Four writers at once, each transaction a few statements whose rows share terms in opposite orders: every row
    takes the agent's corpus row before any term row, so the writers queue instead of deadlocking."""
    agent_id = uuid.UUID(agent["id"])
    words = [f"w{n}" for n in range(12)]
    insert = text("INSERT INTO messages (id, agent_id, role, content, search_text) VALUES (:id, :a, 'user', :t, :t)")

    async def writer(engine: AsyncEngine, turn: int) -> None:
        for round_ in range(5):
            async with engine.begin() as conn:
                for step in range(3):
                    ordered = words if (turn + round_ + step) % 2 else words[::-1]
                    rows = [{"id": uuid.uuid4(), "a": agent_id, "t": " ".join(ordered[n : n + 4])} for n in range(0, 12, 2)]
                    await conn.execute(insert, rows)
            async with engine.begin() as conn:  # and a deletion, which subtracts
                await conn.execute(
                    text("DELETE FROM messages WHERE agent_id = :a AND id = :id"), {"a": agent_id, "id": rows[0]["id"]}
                )

    async def run() -> None:
        engine = db.create_engine(database_url, pool_size=4)
        try:
            await asyncio.gather(*(writer(engine, turn) for turn in range(4)))
        finally:
            await engine.dispose()

    asyncio.run(run())
    kept = assert_in_step(database_url, agent["id"], "messages")
    assert kept["corpus"][0] == 4 * 5 * (3 * 6 - 1)  # writers, rounds, rows written less the one deleted
    assert kept["terms"]["w0"] > 0 and set(kept["terms"]) == set(words)


def test_a_text_of_blanks_is_stored_and_counted_without_terms(agent: dict, database_url: str) -> None:
    # The service never writes one (search_text joins tokens), but a row must not fail for its statistics.
    agent_id = uuid.UUID(agent["id"])
    run_sql(
        database_url,
        "INSERT INTO messages (id, agent_id, role, content, search_text) VALUES (gen_random_uuid(), :a, 'user', ' ', ' ')",
        {"a": agent_id},
    )
    kept, _ = statistics(database_url, agent["id"], "messages")
    assert kept["corpus"][0] == 1 and kept["terms"] == {}
