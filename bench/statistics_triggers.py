"""What keeping the BM25 statistics costs a write: the row triggers of migration 0017 against the statement-level
triggers they replaced (the schema at 0016), in two databases of one embedded PostgreSQL, rounds interleaved.

Each round, in each database, into a new agent: one INSERT of 1,000 passages (an import's batch), 200 passages one
per transaction (a conversation's pace), one DELETE of 500 of them, and the agent's deletion with the 700 left
(AgentRepository.delete, as the service deletes one). After each round the kept statistics must equal a recount.
Passages as bench/search_scale.py makes them (40 Zipf-drawn tokens, clustered 384-dimension vectors). Printed: the
median seconds of each step per schema, and row / statement.

    python -m bench.statistics_triggers            # 5 rounds, ~3 minutes on 2 cores
"""

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

from sqlalchemy import text

from app import db
from app.agents.repository import AgentRepository
from bench import table_upkeep
from bench.retrieval import start_database
from bench.search_scale import DIM, new_agent, texts, unit_vectors

STATEMENT_LEVEL = "0016_keys_by_agent"  # the last revision with migration 0005's statement-level triggers
STEPS = ("insert 1,000 in one statement", "insert 200, one per transaction", "delete 500 in one statement", "delete the agent")
IN_STEP = """
SELECT (SELECT docs FROM lexical_corpus WHERE agent_id = :a AND source = 'archival_passages')
    IS NOT DISTINCT FROM (SELECT nullif(count(*), 0) FROM archival_passages WHERE agent_id = :a AND search_text <> '')
"""


async def one_round(url: str, timings: dict[str, list[float]]) -> None:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    clock = time.perf_counter
    try:
        agent_id = await new_agent(sessions, f"statistics {uuid.uuid4()}")
        batch = table_upkeep.rows(agent_id, texts(1000), unit_vectors(1000))
        started = clock()
        await table_upkeep.insert(sessions, batch)
        timings[STEPS[0]].append(clock() - started)
        singles = table_upkeep.rows(agent_id, texts(200), unit_vectors(200))
        started = clock()
        for row in singles:
            await table_upkeep.insert(sessions, [row])
        timings[STEPS[1]].append(clock() - started)
        async with db.transaction(sessions) as session:
            conn = await session.connection()
            started = clock()
            await conn.execute(
                text("DELETE FROM archival_passages WHERE agent_id = :a AND id = ANY(:ids)"),
                {"a": agent_id, "ids": [row["id"] for row in batch[:500]]},
            )
        timings[STEPS[2]].append(clock() - started)
        async with db.transaction(sessions) as session:
            assert (await (await session.connection()).execute(text(IN_STEP), {"a": agent_id})).scalar(), "out of step"
        async with db.transaction(sessions) as session:
            started = clock()
            await AgentRepository(session).delete(agent_id)
        timings[STEPS[3]].append(clock() - started)
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server, row_level = start_database(Path(tempfile.mkdtemp(prefix="engram-statistics-")), DIM)
    try:
        server.psql('CREATE DATABASE "engram_statement_level";')
        statement_level = db.asyncpg_url(server.get_uri("engram_statement_level"))
        db.run_migrations(statement_level, DIM, STATEMENT_LEVEL)
        timings: dict[str, dict[str, list[float]]] = {"statement": defaultdict(list), "row": defaultdict(list)}
        for _ in range(args.rounds):
            asyncio.run(one_round(statement_level, timings["statement"]))
            asyncio.run(one_round(row_level, timings["row"]))
    finally:
        server.cleanup()
    print(
        f"{'median seconds, ' + str(args.rounds) + ' rounds':34} {'statement (0016)':>17} {'row (0017)':>11} {'row/statement':>14}"
    )
    for step in STEPS:
        statement, row = (statistics.median(timings[kind][step]) for kind in ("statement", "row"))
        print(f"{step:34} {statement:17.3f} {row:11.3f} {row / statement:14.2f}")


if __name__ == "__main__":
    main()
