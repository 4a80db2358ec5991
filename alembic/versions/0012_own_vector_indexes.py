"""no vector index shared by every agent: the largest agents get their own (app/memory/search/agent_indexes.py, built by
the running service), the others an exact scan of their rows. The shared HNSW index served only agents of 20,000
rows and more — slowly when they were a small share of the table, its walk visiting other agents' nodes — while
every insert of every agent paid for its upkeep, and it took ~2 GB per million rows.

Revision ID: 0012_own_vector_indexes
Revises: 0011_import_job_retries
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_own_vector_indexes"
down_revision: str | None = "0011_import_job_retries"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("archival_passages", "messages")


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP INDEX IF EXISTS ix_{table}_embedding")


def downgrade() -> None:
    for table in TABLES:
        # the agents' own indexes (built by the service since) go: the code before this revision never drops them
        op.execute(
            "DO $$ DECLARE name text; BEGIN "
            f"FOR name IN SELECT indexname FROM pg_indexes WHERE tablename = '{table}' "
            f"AND indexname ~ '^ix_{table}_agent_[0-9a-f]{{32}}$' LOOP EXECUTE format('DROP INDEX %I', name); END LOOP; END $$"
        )
        op.execute(f"CREATE INDEX IF NOT EXISTS ix_{table}_embedding ON {table} USING hnsw (embedding vector_cosine_ops)")
