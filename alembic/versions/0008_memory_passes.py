"""memory passes and handed-in conversations: a turn has a kind (a chat turn, or a sleep-time memory pass with the
last message it went over), at most one pass runs per agent; a handed-in message is marked as such (recall memory
only, never the agent's context) and may carry the caller's own id, unique per agent (a retried hand-in stores
nothing twice)

Revision ID: 0008_memory_passes
Revises: 0007_dated_memories
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0008_memory_passes"
down_revision: str | None = "0007_dated_memories"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("kind", sa.Text(), nullable=False, server_default="chat"))
    op.add_column("turns", sa.Column("through_seq", sa.BigInteger()))
    op.create_index(
        "ux_turns_one_running_pass",
        "turns",
        ["agent_id"],
        unique=True,
        postgresql_where=sa.text("kind = 'memory_pass' AND status = 'running'"),
    )
    op.add_column("messages", sa.Column("handed_in", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("messages", sa.Column("external_id", sa.Text()))
    op.create_index(
        "ux_messages_agent_external_id",
        "messages",
        ["agent_id", "external_id"],
        unique=True,
        postgresql_where=sa.text("external_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ux_messages_agent_external_id", "messages")
    op.drop_column("messages", "external_id")
    op.drop_column("messages", "handed_in")
    op.drop_index("ux_turns_one_running_pass", "turns")
    op.drop_column("turns", "through_seq")
    op.drop_column("turns", "kind")
