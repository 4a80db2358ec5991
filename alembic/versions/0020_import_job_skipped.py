"""import jobs count the items they did not store: drawn only from sources erased since the job was submitted (as
erasing those would have erased them), which were counted done and only logged

Revision ID: 0020_import_job_skipped
Revises: 0019_passage_keys
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0020_import_job_skipped"
down_revision: str | None = "0019_passage_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("import_jobs", sa.Column("skipped", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    op.drop_column("import_jobs", "skipped")
