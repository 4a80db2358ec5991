"""import jobs that fail: failures in a row and the time of the next attempt, so that a failing job waits (longer
each time) without holding up the jobs behind it, and ends `failed` instead of retrying forever

Revision ID: 0011_import_job_retries
Revises: 0010_agent_text_index
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0011_import_job_retries"
down_revision: str | None = "0010_agent_text_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("import_jobs", sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("import_jobs", sa.Column("retry_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("import_jobs", "retry_at")
    op.drop_column("import_jobs", "attempts")
