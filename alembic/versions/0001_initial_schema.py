"""initial schema: agents, core memory blocks + revisions, archival passages, messages, turns, turn events

Revision ID: 0001_initial
Revises:
Create Date: 2026-12-02
"""

import os
from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID

from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TSV = "to_tsvector('simple'::regconfig, search_text)"


def _embedding_dim() -> int:
    # Given by `engram migrate` / the service (the embedder's dimension); for a bare `alembic upgrade`, the
    # variable, else the default embedder's 384.
    dim = op.get_context().config.attributes.get("embedding_dim") or os.environ.get("ENGRAM_EMBEDDING_DIM") or 384
    return int(dim)


def _uuid_pk() -> sa.Column:
    return sa.Column("id", UUID(as_uuid=True), primary_key=True)


def _agent_fk() -> sa.Column:
    return sa.Column("agent_id", UUID(as_uuid=True), sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False)


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable, server_default=None if nullable else sa.func.now())


def upgrade() -> None:
    dim = _embedding_dim()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "agents",
        _uuid_pk(),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("system", sa.Text),
        sa.Column("model", sa.Text),
        sa.Column("summary", sa.Text),
        sa.Column("context_start_seq", sa.BigInteger, nullable=False, server_default="0"),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index("ix_agents_created_at", "agents", ["created_at", "id"])

    op.create_table(
        "memory_blocks",
        _uuid_pk(),
        _agent_fk(),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False, server_default=""),
        sa.Column("char_limit", sa.Integer, nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("read_only", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("version", sa.Integer, nullable=False, server_default="1"),
        _ts("updated_at"),
        sa.UniqueConstraint("agent_id", "label", name="uq_memory_blocks_agent_label"),
    )

    op.create_table(
        "memory_block_revisions",
        _uuid_pk(),
        sa.Column("block_id", UUID(as_uuid=True), sa.ForeignKey("memory_blocks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("turn_id", UUID(as_uuid=True)),
        _ts("created_at"),
        sa.UniqueConstraint("block_id", "version", name="uq_memory_block_revisions_block_version"),
    )

    op.create_table(
        "archival_passages",
        _uuid_pk(),
        _agent_fk(),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("tags", ARRAY(sa.Text), nullable=False, server_default="{}"),
        sa.Column("embedding", Vector(dim), nullable=False),
        sa.Column("embedding_model", sa.Text, nullable=False),
        sa.Column("search_text", sa.Text, nullable=False, server_default=""),
        sa.Column("tsv", TSVECTOR, sa.Computed(TSV, persisted=True)),
        _ts("created_at"),
    )
    op.create_index("ix_archival_passages_agent_created", "archival_passages", ["agent_id", "created_at"])
    op.create_index("ix_archival_passages_tsv", "archival_passages", ["tsv"], postgresql_using="gin")
    op.create_index("ix_archival_passages_tags", "archival_passages", ["tags"], postgresql_using="gin")
    op.create_index(
        "ix_archival_passages_embedding",
        "archival_passages",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )

    op.create_table(
        "turns",
        _uuid_pk(),
        _agent_fk(),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("stop_reason", sa.Text),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("reply", sa.Text),
        sa.Column("usage", JSONB, nullable=False, server_default="{}"),
        sa.Column("idempotency_key", sa.Text),
        _ts("created_at"),
        _ts("finished_at", nullable=True),
        sa.UniqueConstraint("agent_id", "idempotency_key", name="uq_turns_agent_idempotency_key"),
    )
    op.create_index("ix_turns_agent_created", "turns", ["agent_id", "created_at"])
    op.create_index("ix_turns_running", "turns", ["status"], postgresql_where=sa.text("status = 'running'"))

    op.create_table(
        "turn_events",
        sa.Column("turn_id", UUID(as_uuid=True), sa.ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        _agent_fk(),
        sa.Column("payload", JSONB, nullable=False),
        _ts("created_at"),
    )

    op.create_table(
        "messages",
        _uuid_pk(),
        sa.Column("seq", sa.BigInteger, sa.Identity(), nullable=False, unique=True),
        _agent_fk(),
        sa.Column("turn_id", UUID(as_uuid=True), sa.ForeignKey("turns.id", ondelete="SET NULL")),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False, server_default=""),
        sa.Column("tool_calls", JSONB),
        sa.Column("tool_call_id", sa.Text),
        sa.Column("name", sa.Text),
        sa.Column("embedding", Vector(dim)),
        sa.Column("search_text", sa.Text, nullable=False, server_default=""),
        sa.Column("tsv", TSVECTOR, sa.Computed(TSV, persisted=True)),
        _ts("created_at"),
    )
    op.create_index("ix_messages_agent_seq", "messages", ["agent_id", "seq"])
    op.create_index("ix_messages_turn", "messages", ["turn_id"])
    op.create_index("ix_messages_created_at", "messages", ["created_at"])
    op.create_index("ix_messages_tsv", "messages", ["tsv"], postgresql_using="gin")
    op.create_index(
        "ix_messages_embedding",
        "messages",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def downgrade() -> None:
    for table in ("messages", "turn_events", "turns", "archival_passages", "memory_block_revisions", "memory_blocks", "agents"):
        op.drop_table(table)
