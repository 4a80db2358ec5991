"""quotas: fixed-window usage counters per tenant and API key, and optional limits on each key

Revision ID: 0006_quotas
Revises: 0005_lexical_statistics
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

from alembic import op

revision: str = "0006_quotas"
down_revision: str | None = "0005_lexical_statistics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY_LIMITS = ("requests_per_minute", "turns_per_minute", "llm_tokens_per_day")


def upgrade() -> None:
    op.create_table(
        "quota_counters",
        sa.Column("scope", sa.Text, primary_key=True),  # tenant | key
        sa.Column("subject_id", UUID(as_uuid=True), primary_key=True),
        sa.Column("metric", sa.Text, primary_key=True),  # requests | turns | llm_tokens
        sa.Column("window_start", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("used", sa.BigInteger, nullable=False),
    )
    for column in KEY_LIMITS:
        op.add_column("api_keys", sa.Column(column, sa.BigInteger))


def downgrade() -> None:
    for column in KEY_LIMITS:
        op.drop_column("api_keys", column)
    op.drop_table("quota_counters")
