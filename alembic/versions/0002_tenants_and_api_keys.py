"""tenants and API keys; every agent belongs to a tenant (existing agents to the default tenant)

Revision ID: 0002_tenants
Revises: 0001_initial
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

from alembic import op

revision: str = "0002_tenants"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_TENANT = "00000000-0000-0000-0000-000000000000"


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.execute(f"INSERT INTO tenants (id, name) VALUES ('{DEFAULT_TENANT}', 'default')")
    op.create_table(
        "api_keys",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", UUID(as_uuid=True), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("prefix", sa.Text, nullable=False),
        sa.Column("key_hash", sa.Text, nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_api_keys_tenant_id", "api_keys", ["tenant_id"])
    op.add_column(
        "agents",
        sa.Column(
            "tenant_id",
            UUID(as_uuid=True),
            sa.ForeignKey("tenants.id", ondelete="CASCADE"),
            nullable=False,
            server_default=DEFAULT_TENANT,
        ),
    )
    op.alter_column("agents", "tenant_id", server_default=None)
    op.create_index("ix_agents_tenant_created", "agents", ["tenant_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_agents_tenant_created", "agents")
    op.drop_column("agents", "tenant_id")
    op.drop_table("api_keys")
    op.drop_table("tenants")
