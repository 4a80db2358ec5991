"""Passage keys: a caller's name for an archival passage (`PUT …/archival/keys/{key}` stores or supersedes the passage
under it), unique among the agent's current passages. A superseded passage keeps its key: the key's earlier versions
are its history. So the unique index holds only current passages (partial, by `superseded_by IS NULL`), and a second,
plain one finds every version of a key. Both begin with agent_id: the table is partitioned by it (migration 0015),
and a unique index of a partitioned table must hold its partition key.

Revision ID: 0019_passage_keys
Revises: 0018_passage_sources
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0019_passage_keys"
down_revision: str | None = "0018_passage_sources"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("archival_passages", sa.Column("key", sa.Text(), nullable=True))
    op.create_index(
        "ux_archival_passages_agent_current_key",
        "archival_passages",
        ["agent_id", "key"],
        unique=True,
        postgresql_where=sa.text("key IS NOT NULL AND superseded_by IS NULL"),
    )
    op.create_index(
        "ix_archival_passages_agent_key",
        "archival_passages",
        ["agent_id", "key"],
        postgresql_where=sa.text("key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_archival_passages_agent_key", table_name="archival_passages")
    op.drop_index("ux_archival_passages_agent_current_key", table_name="archival_passages")
    op.drop_column("archival_passages", "key")
