"""Every per-agent table keyed by its agent, and every reference between them through it: what a distribution by
agent (Citus: `create_distributed_table(…, 'agent_id')`) needs, checked by tests/db/test_citus_ready.py.

memory_block_revisions and import_items get an agent_id (their block's and their job's); the primary keys of
memory_blocks, memory_block_revisions, turns, turn_events, import_jobs and import_items begin with agent_id; each
foreign key between them (a revision's block, a message's or an event's turn, an item's job) includes it. Plain
ALTERs in one transaction: each key is rebuilt under the table's lock, so writes to these tables wait while it runs
(turn_events, which grows with every turn, the longest).

Revision ID: 0016_keys_by_agent
Revises: 0015_partition_by_agent
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016_keys_by_agent"
down_revision: str | None = "0015_partition_by_agent"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The agent of the rows that reach it through another table: (table, column, parent, parent's key).
INHERITED = (("memory_block_revisions", "block_id", "memory_blocks", "id"), ("import_items", "job_id", "import_jobs", "id"))
# Foreign keys by one column, before and after: (table, constraint, old definition, new definition).
REFERENCES = (
    (
        "memory_block_revisions",
        "memory_block_revisions_block_id_fkey",
        "FOREIGN KEY (block_id) REFERENCES memory_blocks (id) ON DELETE CASCADE",
        "FOREIGN KEY (agent_id, block_id) REFERENCES memory_blocks (agent_id, id) ON DELETE CASCADE",
    ),
    (
        "messages",
        "messages_turn_id_fkey",
        "FOREIGN KEY (turn_id) REFERENCES turns (id) ON DELETE SET NULL",
        "FOREIGN KEY (agent_id, turn_id) REFERENCES turns (agent_id, id) ON DELETE SET NULL (turn_id)",
    ),
    (
        "turn_events",
        "turn_events_turn_id_fkey",
        "FOREIGN KEY (turn_id) REFERENCES turns (id) ON DELETE CASCADE",
        "FOREIGN KEY (agent_id, turn_id) REFERENCES turns (agent_id, id) ON DELETE CASCADE",
    ),
    (
        "import_items",
        "import_items_job_id_fkey",
        "FOREIGN KEY (job_id) REFERENCES import_jobs (id) ON DELETE CASCADE",
        "FOREIGN KEY (agent_id, job_id) REFERENCES import_jobs (agent_id, id) ON DELETE CASCADE",
    ),
)
# Primary keys, before and after.
KEYS = (
    ("memory_blocks", "id", "agent_id, id"),
    ("memory_block_revisions", "id", "agent_id, id"),
    ("turns", "id", "agent_id, id"),
    ("turn_events", "turn_id, seq", "agent_id, turn_id, seq"),
    ("import_jobs", "id", "agent_id, id"),
    ("import_items", "job_id, position", "agent_id, job_id, position"),
)


def upgrade() -> None:
    for table, column, parent, key in INHERITED:
        op.execute(f"ALTER TABLE {table} ADD COLUMN agent_id uuid")
        op.execute(f"UPDATE {table} t SET agent_id = p.agent_id FROM {parent} p WHERE p.{key} = t.{column}")
        op.execute(f"ALTER TABLE {table} ALTER COLUMN agent_id SET NOT NULL")
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE"
        )
    for table, constraint, _, _ in REFERENCES:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}")
    for table, _, columns in KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({columns})")
    op.execute("ALTER TABLE memory_block_revisions DROP CONSTRAINT uq_memory_block_revisions_block_version")
    op.execute(
        "ALTER TABLE memory_block_revisions ADD CONSTRAINT uq_memory_block_revisions_block_version "
        "UNIQUE (agent_id, block_id, version)"
    )
    for table, constraint, _, definition in REFERENCES:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {constraint} {definition}")


def downgrade() -> None:
    for table, constraint, _, _ in REFERENCES:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}")
    op.execute("ALTER TABLE memory_block_revisions DROP CONSTRAINT uq_memory_block_revisions_block_version")
    op.execute(
        "ALTER TABLE memory_block_revisions ADD CONSTRAINT uq_memory_block_revisions_block_version UNIQUE (block_id, version)"
    )
    for table, columns, _ in KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({columns})")
    for table, constraint, definition, _ in REFERENCES:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {constraint} {definition}")
    for table, _, _, _ in INHERITED:
        op.execute(f"ALTER TABLE {table} DROP COLUMN agent_id")
