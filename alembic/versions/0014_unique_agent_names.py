"""An agent's name is unique within its tenant: agents are reached by name (an OpenAI `model`, the CLI, Letta's
SDK), and two of one name made every by-name request fail. Agents that already share a name keep the oldest one's
name; the others are renamed "<name> (2)", "<name> (3)", … in the order they were created.

Revision ID: 0014_unique_agent_names
Revises: 0013_term_counts
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014_unique_agent_names"
down_revision: str | None = "0013_term_counts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """UPDATE agents a SET name = a.name || ' (' || d.n || ')'
        FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id, name ORDER BY created_at, id) AS n FROM agents) d
        WHERE a.id = d.id AND d.n > 1"""
    )
    op.create_index("ux_agents_tenant_name", "agents", ["tenant_id", "name"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_agents_tenant_name", table_name="agents")
