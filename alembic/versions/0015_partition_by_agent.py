"""Archival passages and messages hash-partitioned by agent: each partition holds its agents' rows with their own
indexes, and a statement about one agent reads one partition.

Each table is rebuilt beside the old one as a partitioned table (ENGRAM_PARTITIONS partitions, fixed here: changing
the setting later changes nothing), with the same columns and indexes; primary keys become (agent_id, id) and
`messages.seq` unique per agent, as a distribution by agent_id (Citus) also needs. The rows move in committed
batches in key order, with progress in the log: a run cut short (a stop, a crash) goes on from its last batch. The
service may keep writing meanwhile: a trigger on the old table notes each row changed, and the last step replays
them under a short lock, swaps the tables and drops the old one. The agents' own vector indexes go with the old
table; the service builds them again on the agents' partitions.

Revision ID: 0015_partition_by_agent
Revises: 0014_unique_agent_names
Create Date: 2026-12-06
"""

import logging
import os
import re
import time
from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from alembic import context, op

revision: str = "0015_partition_by_agent"
down_revision: str | None = "0014_unique_agent_names"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("alembic.engram")

MIGRATION_LOCK_KEY = 0x656E6772  # env.py's: held for the whole move, across its commits
TABLES = ("archival_passages", "messages")
BATCH_ROWS = 20_000  # rows a batch moves (config attribute `move_batch_rows`: tests use small ones)
DEFAULT_PARTITIONS = 16
MIN_SERVER_VERSION = 170000
CHANGES_LEFT_FOR_THE_LOCK = 1000  # what the move replays before it holds writers back for the rest
LOCK_TIMEOUT = "5s"  # the swap's wait for its lock, at most; then the run fails and is resumed by the next one
CHANGES = "partition_move_changes"
LEXICAL_TRIGGERS = {
    "insert": "NEW TABLE AS new_rows",
    "delete": "OLD TABLE AS old_rows",
    "update": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
}
# What the new table takes of the old one's columns: all there is to a column but its constraints.
COLUMNS_ALIKE = "INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING IDENTITY INCLUDING STORAGE INCLUDING COMPRESSION"
# The agents' own vector indexes (app/memory/search/agent_indexes.py) stay with the old table.
OWN_INDEX = r"_agent_[0-9a-f]{32}$"


def partitions() -> int:
    value = context.config.attributes.get("partitions") or os.environ.get("ENGRAM_PARTITIONS") or DEFAULT_PARTITIONS
    count = int(value)
    if not 1 <= count <= 1024:
        raise ValueError(f"ENGRAM_PARTITIONS must be between 1 and 1024, not {count}")
    return count


def upgrade() -> None:
    version = op.get_bind().execute(text("SHOW server_version_num")).scalar_one()
    if int(version) < MIN_SERVER_VERSION:
        raise RuntimeError(
            f"this migration needs PostgreSQL 17 or later (an identity column on a partitioned table); the server is "
            f"{int(version) // 10000}: upgrade PostgreSQL first (nothing was changed)"
        )
    count = partitions()
    op.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")  # outlives the commits of the moves below
    for table in TABLES:
        if not _partitioned(op.get_bind(), table):
            _move(table, count)
    op.execute(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")  # env.py's, for the rest of the transaction
    op.execute(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})")
    op.execute(f"DROP TABLE IF EXISTS {CHANGES}")
    op.execute("DROP FUNCTION IF EXISTS engram_note_change()")


def _partitioned(conn: Connection, table: str) -> bool:
    return bool(
        conn.execute(
            text("SELECT count(*) FROM pg_partitioned_table WHERE partrelid = CAST(:t AS regclass)"), {"t": table}
        ).scalar()
    )


def _columns(conn: Connection, table: str) -> str:
    """The columns a row is copied by: all but the generated ones."""
    rows = conn.execute(
        text(
            "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 AND NOT attisdropped "
            "AND attgenerated = '' ORDER BY attnum"
        ),
        {"t": table},
    )
    return ", ".join(rows.scalars())


def _move(table: str, count: int) -> None:
    staging = f"{table}_by_agent"
    with op.get_context().autocommit_block():
        conn = op.get_bind()
        _prepare(conn, table, staging, count)
        columns = _columns(conn, table)
        total = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
        start = conn.execute(text(f"SELECT agent_id, id FROM {staging} ORDER BY agent_id DESC, id DESC LIMIT 1")).first()
        moved = conn.execute(text(f"SELECT count(*) FROM {staging}")).scalar_one()
        began = time.monotonic()
        batch = int(context.config.attributes.get("move_batch_rows") or BATCH_ROWS)
        stop_after = context.config.attributes.get("stop_after_batches")  # tests: a run cut short
        log.info("%s: moving %d rows into %d partitions (%d moved before)", table, total, count, moved)
        while True:
            after = "WHERE (agent_id, id) > (:agent_id, :id)" if start else ""
            keys = {"agent_id": start[0], "id": start[1]} if start else {}
            end = conn.execute(
                text(f"SELECT agent_id, id FROM {table} {after} ORDER BY agent_id, id OFFSET {batch - 1} LIMIT 1"), keys
            ).first()
            upto = "(agent_id, id) <= (:end_agent, :end_id)" if end else "TRUE"
            keys |= {"end_agent": end[0], "end_id": end[1]} if end else {}
            where = " AND ".join(part for part in (after.removeprefix("WHERE "), upto) if part)
            copied = _copy(
                conn,
                f"INSERT INTO {staging} ({columns}) SELECT {columns} FROM {table} WHERE {where} ON CONFLICT DO NOTHING",
                keys,
            )
            moved += copied
            log.info("%s: %d of %d rows moved (%.0f s)", table, moved, total, time.monotonic() - began)
            if stop_after is not None:
                stop_after -= 1
                if stop_after <= 0:
                    raise RuntimeError(f"{table}: the move stopped here (stop_after_batches), as a crash would")
            if end is None:
                break
            start = end
        if table == "archival_passages":  # a successor is the same agent's (checked once every row is in: a batch may
            # end between a passage and its successor)
            _constrain(
                conn,
                staging,
                f"{staging}_superseded_by_fkey",
                f"FOREIGN KEY (agent_id, superseded_by) REFERENCES {staging} (agent_id, id) ON DELETE SET NULL (superseded_by)",
            )
        conn.execute(text(f"ANALYZE {staging}"))
        while _replay(conn, table, staging, columns, limit=CHANGES_LEFT_FOR_THE_LOCK * 10) > CHANGES_LEFT_FOR_THE_LOCK:
            pass  # the changes of the move so far, while writers go on: the lock below waits only for the last ones
    _swap(op.get_bind(), table, staging, columns)


def _copy(conn: Connection, statement: str, keys: dict[str, object]) -> int:
    """One batch; again if an agent (or turn) was deleted while its rows were being copied (what that deletion took
    with it is gone from the old table by then, and the replay sees to the rest)."""
    for attempt in range(3):
        try:
            return int(conn.execute(text(statement), keys).rowcount)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _replay(conn: Connection, table: str, staging: str, columns: str, *, limit: int | None) -> int:
    """Brings the rows written since the move began (up to `limit` of the changes noted) into the new table, as they
    now are in the old one (or gone); one statement: a change is forgotten only with its row replayed. Returns the
    changes taken."""
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns.split(", ") if c not in ("agent_id", "id"))
    taken = f"SELECT ctid FROM {CHANGES} WHERE source = :t" + (f" LIMIT {limit}" if limit else "")
    row = conn.execute(
        text(
            f"""WITH taken AS (DELETE FROM {CHANGES} WHERE ctid IN ({taken}) RETURNING agent_id, id),
            changed AS (SELECT DISTINCT agent_id, id FROM taken),
            replayed AS (
                INSERT INTO {staging} ({columns}) SELECT {", ".join(f"t.{c}" for c in columns.split(", "))}
                FROM {table} t JOIN changed USING (agent_id, id)
                ON CONFLICT (agent_id, id) DO UPDATE SET {updates} RETURNING 1
            ), gone AS (
                DELETE FROM {staging} s USING changed c WHERE s.agent_id = c.agent_id AND s.id = c.id
                AND NOT EXISTS (SELECT FROM {table} t WHERE t.agent_id = c.agent_id AND t.id = c.id) RETURNING 1
            )
            SELECT (SELECT count(*) FROM taken), (SELECT count(*) FROM replayed), (SELECT count(*) FROM gone)"""
        ),
        {"t": table},
    ).one()
    log.info("%s: %d rows written during the move replayed, %d deleted", table, row[1], row[2])
    return int(row[0])


def _prepare(conn: Connection, table: str, staging: str, count: int) -> None:
    """The partitioned table (empty, with its keys and indexes), the key index the batches walk, and the trigger
    that notes what changes meanwhile. Each step is skipped when a run cut short has done it already."""
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {CHANGES} (source text NOT NULL, agent_id uuid NOT NULL, id uuid NOT NULL)"))
    conn.execute(
        text(
            "CREATE OR REPLACE FUNCTION engram_note_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"INSERT INTO {CHANGES} SELECT TG_TABLE_NAME, agent_id, id FROM changed; RETURN NULL; END $$"
        )
    )
    for event, transition in (("insert", "NEW"), ("update", "NEW"), ("delete", "OLD")):
        conn.execute(  # in place, never dropped and made again: no write may pass unnoted in between
            text(
                f"CREATE OR REPLACE TRIGGER {table}_move_{event} AFTER {event.upper()} ON {table} REFERENCING {transition} "
                "TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION engram_note_change()"
            )
        )
    # Not CONCURRENTLY: that waits for every older snapshot, among them another replica's start waiting for the
    # migration lock (a deadlock); writes wait for this build instead (2M rows: seconds).
    conn.execute(text(f"CREATE INDEX IF NOT EXISTS {table}_move_key ON {table} (agent_id, id)"))
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {staging} (LIKE {table} {COLUMNS_ALIKE}) PARTITION BY HASH (agent_id)"))
    made = conn.execute(text("SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass(:t)"), {"t": staging}).scalar()
    count = int(made or 0) or count  # a run cut short made them already: its count stands
    for n in range(count):
        conn.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {table}_p{n:03d} PARTITION OF {staging} "
                f"FOR VALUES WITH (MODULUS {count}, REMAINDER {n}) WITH (toast_tuple_target = 4080)"
            )
        )
    constraints = [
        ("pkey", "PRIMARY KEY (agent_id, id)"),
        ("agent_id_fkey", "FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE"),
    ]
    if table == "messages":
        constraints += [
            ("seq_key", "UNIQUE (agent_id, seq)"),
            ("turn_id_fkey", "FOREIGN KEY (turn_id) REFERENCES turns (id) ON DELETE SET NULL"),
        ]
    for name, definition in constraints:
        _constrain(conn, staging, f"{staging}_{name}", definition)
    indexes = conn.execute(
        text(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = CAST(:t AS regclass) AND NOT i.indisprimary AND c.relname !~ :own "
            "AND c.relname NOT IN (:key, :seq, :agent_seq)"
        ),
        {
            "t": table,
            "own": OWN_INDEX,
            "key": f"{table}_move_key",
            "seq": "messages_seq_key",
            "agent_seq": "ix_messages_agent_seq",
        },
    ).all()
    for name, definition in indexes:  # the same definitions, on the partitioned table (each partition gets its own)
        head, tail = re.split(r" ON (?:ONLY )?\S+ USING ", definition, maxsplit=1)
        head = head.replace(" INDEX ", " INDEX IF NOT EXISTS ", 1).replace(name, f"{name}_by_agent", 1)
        conn.execute(text(f"{head} ON {staging} USING {tail}"))


def _constrain(conn: Connection, table: str, name: str, definition: str) -> None:
    if not conn.execute(text("SELECT count(*) FROM pg_constraint WHERE conname = :n"), {"n": name}).scalar():
        conn.execute(text(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}"))


def _swap(conn: Connection, table: str, staging: str, columns: str) -> None:
    """Holds writers (and readers) back while it replays the last changes of the move, swaps the tables and drops the
    old one. The lock is taken at once, at its strongest (a weaker one raised later can deadlock with a writer), and
    waited for LOCK_TIMEOUT at most: a run that cannot get it fails, and the next run resumes with little to do."""
    conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    conn.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
    _replay(conn, table, staging, columns, limit=None)
    index_names = (
        conn.execute(
            text(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = CAST(:t AS regclass)"
            ),
            {"t": staging},
        )
        .scalars()
        .all()
    )
    conn.execute(text(f"DROP TABLE {table}"))  # its triggers, own indexes and the move's key index with it
    conn.execute(text(f"ALTER TABLE {staging} RENAME TO {table}"))
    for name in index_names:
        final = name.removesuffix("_by_agent").replace(f"{staging}_", f"{table}_", 1)
        if final != name:
            conn.execute(text(f"ALTER INDEX {name} RENAME TO {final}"))
    for constraint in ("agent_id_fkey", "turn_id_fkey", "superseded_by_fkey"):
        conn.execute(
            text(
                f"DO $$ BEGIN IF EXISTS (SELECT FROM pg_constraint WHERE conname = '{staging}_{constraint}') THEN "
                f"ALTER TABLE {table} RENAME CONSTRAINT {staging}_{constraint} TO {table}_{constraint}; END IF; END $$"
            )
        )
    _rejoin(conn, table)
    conn.execute(text(f"DELETE FROM {CHANGES} WHERE source = :t"), {"t": table})


def downgrade() -> None:
    """Back to one table each, in one transaction (writes wait): the rows copied, the keys and indexes of 0014."""
    conn = op.get_bind()
    for table in TABLES:
        if not _partitioned(conn, table):
            continue
        columns = _columns(conn, table)
        plain = f"{table}_plain"
        conn.execute(text(f"LOCK TABLE {table} IN EXCLUSIVE MODE"))
        conn.execute(text(f"CREATE TABLE {plain} (LIKE {table} {COLUMNS_ALIKE}) WITH (toast_tuple_target = 4080)"))
        conn.execute(text(f"INSERT INTO {plain} ({columns}) SELECT {columns} FROM {table}"))
        indexes = conn.execute(
            text(
                "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = CAST(:t AS regclass) AND NOT i.indisunique"
            ),
            {"t": table},
        ).all()
        conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text(f"ALTER TABLE {plain} RENAME TO {table}"))
        conn.execute(text(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY (id)"))
        conn.execute(
            text(
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE"
            )
        )
        for _, definition in indexes:
            conn.execute(text(definition))
        if table == "messages":
            conn.execute(text("ALTER TABLE messages ADD CONSTRAINT messages_seq_key UNIQUE (seq)"))
            conn.execute(text("CREATE INDEX ix_messages_agent_seq ON messages (agent_id, seq)"))
            conn.execute(
                text(
                    "CREATE UNIQUE INDEX ux_messages_agent_external_id ON messages (agent_id, external_id) WHERE external_id IS NOT NULL"
                )
            )
            conn.execute(
                text(
                    "ALTER TABLE messages ADD CONSTRAINT messages_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES turns (id) ON DELETE SET NULL"
                )
            )
        else:
            conn.execute(
                text(
                    "ALTER TABLE archival_passages ADD CONSTRAINT archival_passages_superseded_by_fkey FOREIGN KEY "
                    "(superseded_by) REFERENCES archival_passages (id) ON DELETE SET NULL"
                )
            )
        _rejoin(conn, table)


def _rejoin(conn: Connection, table: str) -> None:
    """What a table made anew takes over from the one it replaces: the BM25 statistics triggers (migration 0005) and,
    for messages, the count of seq."""
    for event, transition in LEXICAL_TRIGGERS.items():
        conn.execute(
            text(
                f"CREATE TRIGGER {table}_lexical_{event} AFTER {event.upper()} ON {table} REFERENCING {transition} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION lexical_statistics_{event}()"
            )
        )
    if table == "messages":
        conn.execute(
            text("SELECT setval(pg_get_serial_sequence('messages', 'seq'), coalesce(max(seq), 0) + 1, false) FROM messages")
        )
