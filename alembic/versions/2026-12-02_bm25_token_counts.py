"""BM25: token counts per row, and search_text re-tokenised with stemming

Revision ID: 0003_bm25
Revises: 0002_tenants
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0003_bm25"
down_revision: str | None = "0002_tenants"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TOKEN_COUNT = "cardinality(string_to_array(search_text, ' '))"
BATCH = 1000


def _retokenise(table: str, text_sql: str) -> None:
    # search_text is derived data; re-derive it with the tokenizer of this release (English stemming).
    from app.memory.lexical import search_text

    bind = op.get_bind()
    last = None
    while True:
        rows = bind.execute(
            sa.text(f"SELECT id, {text_sql} AS body FROM {table} WHERE (CAST(:last AS uuid) IS NULL OR id > :last) ORDER BY id LIMIT {BATCH}"),
            {"last": last},
        ).all()
        if not rows:
            return
        bind.execute(sa.text(f"UPDATE {table} SET search_text = :s WHERE id = :id"), [{"id": r.id, "s": search_text(r.body)} for r in rows])
        last = rows[-1].id


def upgrade() -> None:
    for table in ("archival_passages", "messages"):
        op.add_column(table, sa.Column("token_count", sa.Integer, sa.Computed(TOKEN_COUNT, persisted=True)))
    _retokenise("archival_passages", "content")
    _retokenise(
        "messages",
        "concat_ws(E'\\n', nullif(content, ''), (SELECT string_agg(c->>'arguments', E'\\n') FROM jsonb_array_elements(coalesce(tool_calls, '[]')) c WHERE c->>'name' = 'send_message'))",
    )


def downgrade() -> None:
    for table in ("archival_passages", "messages"):
        op.drop_column(table, "token_count")
