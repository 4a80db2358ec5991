"""Archival passages and messages partitioned by agent (migration 0015): the upgrade moves every row, goes on after
a run cut short, replays what changed meanwhile, and the downgrade gives back the tables it found."""

import uuid

import pytest
from alembic.config import Config
from pgserver.postgres_server import PostgresServer
from sqlalchemy.exc import DBAPIError

from alembic import command
from app import db
from app.auth.models import DEFAULT_TENANT_ID
from app.settings import E5_DIM
from tests.support.cli import engram
from tests.support.database import create_database, run_sql

BEFORE = "0014_unique_agent_names"
VECTOR = "(SELECT ('[' || string_agg(sin(n * 3 + d)::text, ',') || ']')::vector FROM generate_series(1, {dim}) AS d)"
FILL = f"""
WITH agents AS (
    INSERT INTO agents (id, tenant_id, name, context_start_seq, created_at, updated_at)
    SELECT gen_random_uuid(), :tenant, 'moved ' || a || ' ' || :tag, 0, now(), now() FROM generate_series(1, 3) AS a
    RETURNING id
), passages AS (
    INSERT INTO archival_passages (id, agent_id, content, search_text, embedding, embedding_model, tags, created_at)
    SELECT gen_random_uuid(), agents.id, 'passage ' || n, 'passag ' || n, {VECTOR.format(dim=E5_DIM)}, 'synthetic', '{{}}', now()
    FROM agents, generate_series(1, 8) AS n
    RETURNING agent_id
)
INSERT INTO messages (id, agent_id, role, content, search_text, created_at)
SELECT gen_random_uuid(), agents.id, 'user', 'message ' || n, 'messag ' || n, now() FROM agents, generate_series(1, 6) AS n
"""
# One passage of each agent superseded by another of the same agent, as a correction would leave them.
SUPERSEDE = """
UPDATE archival_passages p SET superseded_by = s.successor, valid_until = now()
FROM (SELECT agent_id, min(id::text)::uuid AS old, max(id::text)::uuid AS successor FROM archival_passages GROUP BY agent_id) s
WHERE p.id = s.old
"""


def migrate(url: str, revision: str = "head", *, down: bool = False, **attributes: object) -> None:
    config = Config(str(db.ALEMBIC_INI))
    config.set_main_option("script_location", str(db.REPO_ROOT / "alembic"))
    config.attributes.update(database_url=db.asyncpg_url(url), embedding_dim=E5_DIM, **attributes)
    (command.downgrade if down else command.upgrade)(config, revision)


# Columns that later migrations add (0018: sources, 0019: key): not what the move is compared on.
LATER_COLUMNS = "'sources' - 'key'"


def fingerprint(url: str) -> dict[str, str]:
    """Every row of the moved tables and of the statistics kept on them, as one digest a table."""
    row = f"(row_to_json(t)::jsonb - {LATER_COLUMNS})::text"
    return {
        table: run_sql(url, f"SELECT md5(coalesce(string_agg({row}, '|' ORDER BY {order}), '')) FROM {table} t")[0][0]
        for table, order in (
            ("archival_passages", "agent_id, id"),
            ("messages", "agent_id, id"),
            ("lexical_corpus", "agent_id, source"),
            ("lexical_terms", "agent_id, source, term"),
        )
    }


def partitioned(url: str) -> dict[str, int]:
    """Each partitioned table and its number of partitions."""
    rows = run_sql(
        url,
        "SELECT p.partrelid::regclass::text, count(i.inhrelid) FROM pg_partitioned_table p "
        "LEFT JOIN pg_inherits i ON i.inhparent = p.partrelid GROUP BY p.partrelid",
    )
    return dict(rows)


@pytest.fixture
def stored(postgres_server: PostgresServer) -> str:
    url = create_database(postgres_server, f"engram_move_{uuid.uuid4().hex[:8]}")
    migrate(url, BEFORE)
    run_sql(url, FILL, {"tenant": DEFAULT_TENANT_ID, "tag": "a"})
    run_sql(url, SUPERSEDE)
    return url


def test_a_move_cut_short_goes_on_replays_what_changed_and_comes_back_on_downgrade(stored: str) -> None:
    url = stored
    with pytest.raises(RuntimeError, match="stopped here"):
        migrate(url, move_batch_rows=5, stop_after_batches=2, partitions=4)
    assert run_sql(url, "SELECT version_num FROM alembic_version") == [(BEFORE,)]
    assert run_sql(url, "SELECT count(*) FROM archival_passages_by_agent") == [(10,)]  # two batches kept

    # The service writes on meanwhile: to rows moved already and to rows not yet moved.
    moved = run_sql(url, "SELECT agent_id, id FROM archival_passages_by_agent WHERE superseded_by IS NULL ORDER BY agent_id, id")
    run_sql(url, "UPDATE archival_passages SET content = 'changed', search_text = 'chang' WHERE id = :id", {"id": moved[0][1]})
    run_sql(url, "DELETE FROM archival_passages WHERE id = :id", {"id": moved[1][1]})
    run_sql(url, FILL, {"tenant": DEFAULT_TENANT_ID, "tag": "b"})
    expected = fingerprint(url)

    migrate(url, move_batch_rows=5, partitions=4)
    assert partitioned(url) == {"archival_passages": 4, "messages": 4}
    assert fingerprint(url) == expected
    assert run_sql(url, "SELECT count(*) FROM archival_passages WHERE superseded_by IS NOT NULL") == [(3,)]
    keys = run_sql(
        url,
        "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid IN ('archival_passages'::regclass, 'messages'::regclass) AND contype IN ('p', 'u', 'f')",
    )
    assert ("archival_passages", "PRIMARY KEY (agent_id, id)") in keys
    assert ("messages", "UNIQUE (agent_id, seq)") in keys
    assert any(t == "archival_passages" and d.startswith("FOREIGN KEY (agent_id, superseded_by)") for t, d in keys)
    assert run_sql(url, "SELECT to_regclass('partition_move_changes'), to_regclass('archival_passages_move_key')") == [
        (None, None)
    ]

    # The statistics triggers work on the partitioned tables, and messages keep counting on.
    [(agent_id, docs)] = run_sql(
        url, "SELECT agent_id, docs FROM lexical_corpus WHERE source = 'messages' ORDER BY agent_id LIMIT 1"
    )
    [(last_seq,)] = run_sql(url, "SELECT max(seq) FROM messages")
    run_sql(
        url,
        "INSERT INTO messages (id, agent_id, role, content, search_text) VALUES (gen_random_uuid(), :a, 'user', 'new', 'new')",
        {"a": agent_id},
    )
    assert run_sql(url, "SELECT docs FROM lexical_corpus WHERE source = 'messages' AND agent_id = :a", {"a": agent_id}) == [
        (docs + 1,)
    ]
    assert run_sql(url, "SELECT seq FROM messages WHERE content = 'new'")[0][0] > last_seq
    # A successor is the same agent's: the key refuses one of another agent.
    [(other,)] = run_sql(url, "SELECT id FROM archival_passages WHERE agent_id <> :a LIMIT 1", {"a": agent_id})
    with pytest.raises(DBAPIError, match="foreign key"):
        run_sql(url, "UPDATE archival_passages SET superseded_by = :o WHERE agent_id = :a", {"o": other, "a": agent_id})

    after_upgrade = fingerprint(url)
    migrate(url, BEFORE, down=True)
    assert partitioned(url) == {}
    assert fingerprint(url) == after_upgrade
    migrate(url, partitions=2)
    assert partitioned(url) == {"archival_passages": 2, "messages": 2}
    assert fingerprint(url) == after_upgrade


def test_the_number_of_partitions_changes_by_migrating_down_and_up_again(postgres_server: PostgresServer) -> None:
    """What docs/scaling.md tells an operator to run: `engram migrate --down-to …`, then `engram migrate` with the new
    ENGRAM_PARTITIONS."""
    url = create_database(postgres_server, f"engram_repartition_{uuid.uuid4().hex[:8]}")
    migrate(url, partitions=4)
    run_sql(url, FILL, {"tenant": DEFAULT_TENANT_ID, "tag": "a"})
    stored = fingerprint(url)
    down = engram("migrate", "--down-to", BEFORE, DATABASE_URL=url)
    assert (down.returncode, down.stdout.strip()) == (0, f"database schema is at {BEFORE}"), down.stderr
    assert partitioned(url) == {}
    up = engram("migrate", DATABASE_URL=url, ENGRAM_PARTITIONS="8")
    assert up.returncode == 0, up.stderr
    assert partitioned(url) == {"archival_passages": 8, "messages": 8}
    assert fingerprint(url) == stored
