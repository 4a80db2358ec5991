"""Migration 0021: an import job's waiting items move from a column per field into one JSON passage (a PassageWrite)
that the worker reads back as it was given, and back into their columns on downgrade."""

import uuid
from datetime import UTC, datetime

from pgserver.postgres_server import PostgresServer

from app.auth.models import DEFAULT_TENANT_ID
from app.memory.schemas import PassageWrite
from tests.db.test_partitioning import migrate
from tests.support.database import create_database, run_sql

BEFORE = "0020_import_job_skipped"
COLUMNS = "SELECT position, content, tags, occurred_at, sources FROM import_items ORDER BY position"
SCHEMA = (
    "SELECT column_name, data_type, udt_name, is_nullable, column_default FROM information_schema.columns "
    "WHERE table_name = 'import_items' ORDER BY column_name"
)


def test_waiting_items_move_into_their_passage_and_back(postgres_server: PostgresServer) -> None:
    url = create_database(postgres_server, f"engram_items_{uuid.uuid4().hex[:8]}")
    migrate(url, BEFORE)
    agent, job, source = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    run_sql(
        url,
        "INSERT INTO agents (id, tenant_id, name, context_start_seq, created_at, updated_at) "
        "VALUES (:a, :t, 'importer', 0, now(), now())",
        {"a": agent, "t": DEFAULT_TENANT_ID},
    )
    run_sql(
        url,
        "INSERT INTO import_jobs (id, agent_id, status, total, done, duplicates, created_at, updated_at, run_started_done) "
        "VALUES (:j, :a, 'queued', 2, 0, 0, now(), now(), 0)",
        {"j": job, "a": agent},
    )
    said = datetime(2024, 5, 1, 9, 30, 15, 250000, tzinfo=UTC)
    run_sql(
        url,
        "INSERT INTO import_items (agent_id, job_id, position, content, tags, occurred_at, sources) VALUES "
        "(:a, :j, 0, 'the cat is called Mochi', ARRAY['pets', 'cat'], :said, ARRAY[CAST(:s AS uuid)]), "
        "(:a, :j, 1, 'a plain note', '{}', NULL, '{}')",
        {"a": agent, "j": job, "said": said, "s": source},
    )
    before, schema = run_sql(url, COLUMNS), run_sql(url, SCHEMA)

    migrate(url)
    passages = [PassageWrite.model_validate(p) for (p,) in run_sql(url, "SELECT passage FROM import_items ORDER BY position")]
    assert passages == [
        PassageWrite(content="the cat is called Mochi", tags=["pets", "cat"], occurred_at=said, sources=[source]),
        PassageWrite(content="a plain note"),
    ]

    migrate(url, BEFORE, down=True)
    assert (run_sql(url, COLUMNS), run_sql(url, SCHEMA)) == (before, schema)
