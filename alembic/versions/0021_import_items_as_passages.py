"""An import job's items keep their passage as it was given, one JSON object (a PassageWrite), not a column per field:
a field added to a passage travels through a job without a column here. The items waiting when it runs are moved
into it, and back on downgrade.

Revision ID: 0021_import_items_as_passages
Revises: 0020_import_job_skipped
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

from alembic import op

revision: str = "0021_import_items_as_passages"
down_revision: str | None = "0020_import_job_skipped"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("content", "tags", "occurred_at", "sources")


def upgrade() -> None:
    op.add_column("import_items", sa.Column("passage", JSONB()))
    op.execute(
        "UPDATE import_items SET passage = jsonb_build_object("
        "'content', content, 'tags', to_jsonb(tags), 'occurred_at', occurred_at, 'sources', to_jsonb(sources))"
    )
    op.alter_column("import_items", "passage", nullable=False)
    for column in COLUMNS:
        op.drop_column("import_items", column)


def downgrade() -> None:
    op.add_column("import_items", sa.Column("content", sa.Text()))
    op.add_column("import_items", sa.Column("tags", ARRAY(sa.Text())))
    op.add_column("import_items", sa.Column("occurred_at", sa.DateTime(timezone=True)))
    op.add_column("import_items", sa.Column("sources", ARRAY(UUID(as_uuid=True)), nullable=False, server_default="{}"))
    op.execute(
        "UPDATE import_items SET content = passage->>'content', "
        "tags = ARRAY(SELECT jsonb_array_elements_text(passage->'tags')), "
        "occurred_at = (passage->>'occurred_at')::timestamptz, "
        "sources = ARRAY(SELECT jsonb_array_elements_text(passage->'sources')::uuid)"
    )
    op.alter_column("import_items", "content", nullable=False)
    op.alter_column("import_items", "tags", nullable=False)
    op.drop_column("import_items", "passage")
