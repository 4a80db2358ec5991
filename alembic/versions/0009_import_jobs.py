"""bulk imports as jobs: a job per POST …/archival/import, and its items until each is stored (deleted in the
transaction that stores it, so a job resumed after a crash stores none twice)

Revision ID: 0009_import_jobs
Revises: 0008_memory_passes
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0009_import_jobs"
down_revision: str | None = "0008_memory_passes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "import_jobs",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("agent_id", sa.Uuid(), sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("duplicates", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("run_started_at", sa.DateTime(timezone=True)),
        sa.Column("run_started_done", sa.Integer(), nullable=False),
    )
    op.create_index("ix_import_jobs_agent_id", "import_jobs", ["agent_id"])
    op.create_index(
        "ix_import_jobs_pending", "import_jobs", ["created_at"], postgresql_where=sa.text("status IN ('queued', 'running')")
    )
    op.create_table(
        "import_items",
        sa.Column("job_id", sa.Uuid(), sa.ForeignKey("import_jobs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("position", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True)),
    )


def downgrade() -> None:
    op.drop_table("import_items")
    op.drop_table("import_jobs")
