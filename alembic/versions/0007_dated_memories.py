"""dated memories: occurred_at on archival passages and messages (when it happened or was said, besides when it was
stored), and superseded passages (valid_until, superseded_by)

Revision ID: 0007_dated_memories
Revises: 0006_quotas
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

from alembic import op

revision: str = "0007_dated_memories"
down_revision: str | None = "0006_quotas"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("archival_passages", "messages")


def upgrade() -> None:
    for table in TABLES:
        # Until now a row's only date was when it was stored: that is when it happened, as far as anyone knows.
        op.add_column(table, sa.Column("occurred_at", sa.DateTime(timezone=True)))
        op.execute(f"UPDATE {table} SET occurred_at = created_at")
        op.alter_column(table, "occurred_at", nullable=False, server_default=sa.text("now()"))
    op.add_column("archival_passages", sa.Column("valid_until", sa.DateTime(timezone=True)))
    op.add_column(
        "archival_passages",
        sa.Column("superseded_by", UUID(as_uuid=True), sa.ForeignKey("archival_passages.id", ondelete="SET NULL")),
    )
    # `as_of` reads select on occurred_at within an agent.
    op.create_index("ix_archival_passages_agent_occurred", "archival_passages", ["agent_id", "occurred_at"])
    # Deleting a passage looks up the passages it superseded (the foreign key, and reopening them); few rows have one.
    op.create_index(
        "ix_archival_passages_superseded_by",
        "archival_passages",
        ["superseded_by"],
        postgresql_where=sa.text("superseded_by IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_archival_passages_superseded_by", "archival_passages")
    op.drop_index("ix_archival_passages_agent_occurred", "archival_passages")
    op.drop_column("archival_passages", "superseded_by")
    op.drop_column("archival_passages", "valid_until")
    for table in TABLES:
        op.drop_column(table, "occurred_at")
