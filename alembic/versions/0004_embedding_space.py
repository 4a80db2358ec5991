"""Embedding space: the model of the database's vectors (one row), and the model of each message's vector

Revision ID: 0004_embedding_space
Revises: 0003_bm25
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0004_embedding_space"
down_revision: str | None = "0003_bm25"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "embedding_space",
        sa.Column("id", sa.SmallInteger, primary_key=True),
        sa.Column("model", sa.Text, nullable=False),
        # false while `engram reembed` is moving the vectors to `model`
        sa.Column("complete", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("id = 1", name="embedding_space_single_row"),
    )
    op.add_column("messages", sa.Column("embedding_model", sa.Text))
    # An existing database: its passages name their model; messages did not, and were embedded by the same one.
    # With vectors but no passage, the model is unknown: the service then asks for `engram reembed`.
    op.execute(
        """
        INSERT INTO embedding_space (id, model, complete)
        SELECT 1,
               coalesce((SELECT embedding_model FROM archival_passages GROUP BY 1 ORDER BY count(*) DESC LIMIT 1),
                        'unknown (stored before Engram recorded it)'),
               (SELECT count(DISTINCT embedding_model) FROM archival_passages) <= 1
        WHERE EXISTS (SELECT FROM archival_passages) OR EXISTS (SELECT FROM messages WHERE embedding IS NOT NULL)
        """
    )
    op.execute("UPDATE messages SET embedding_model = (SELECT model FROM embedding_space) WHERE embedding IS NOT NULL")


def downgrade() -> None:
    op.drop_column("messages", "embedding_model")
    op.drop_table("embedding_space")
