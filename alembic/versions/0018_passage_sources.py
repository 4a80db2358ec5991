"""Provenance: an archival passage's `sources`, the ids of this agent's messages and passages it was distilled from
(a fact written from what was said). Erasing a source erases the passages drawn from it alone
(app/memory/erasure.py), so they are found by source: a GIN index. An import job's items carry theirs until stored.

Revision ID: 0018_passage_sources
Revises: 0017_statistics_by_row
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, UUID

from alembic import op

revision: str = "0018_passage_sources"
down_revision: str | None = "0017_statistics_by_row"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("archival_passages", "import_items"):
        op.add_column(table, sa.Column("sources", ARRAY(UUID(as_uuid=True)), nullable=False, server_default="{}"))
    op.create_index(
        "ix_archival_passages_sources",
        "archival_passages",
        ["sources"],
        postgresql_using="gin",
        postgresql_where=sa.text("sources <> '{}'"),
    )


def downgrade() -> None:
    op.drop_index("ix_archival_passages_sources", table_name="archival_passages")
    for table in ("archival_passages", "import_items"):
        op.drop_column(table, "sources")
