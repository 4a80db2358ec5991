"""BM25: token counts per row, and search_text re-tokenised with stemming

Revision ID: 0003_bm25
Revises: 0002_tenants
Create Date: 2026-12-02
"""

import re
import unicodedata
from collections.abc import Sequence

import snowballstemmer
import sqlalchemy as sa

from alembic import op

revision: str = "0003_bm25"
down_revision: str | None = "0002_tenants"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TOKEN_COUNT = "cardinality(string_to_array(search_text, ' '))"
BATCH = 1000


# The tokenizer of this release (app/memory/search/lexical.py as of 0003), frozen here: a migration must give the same
# result whatever the application's tokenizer later becomes.
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_MAX_TOKEN_CHARS = 60
_STOPWORDS = frozenset(
    "a an and are as at be but by do does did for from had has have he her hers him his how i if in into is it its "
    "me my of on or our she so than that the their them then there these they this to was we were what when where "
    "which who whom why will with you your yours can could would should about been being am".split()
)
_STEMMER = snowballstemmer.stemmer("english")


def search_text(text: str) -> str:
    out: list[str] = []
    for run in _TOKEN.findall(unicodedata.normalize("NFKC", text).lower()):
        if _IS_CJK.match(run):
            grams = [run[i : i + 2] for i in range(len(run) - 1)] if len(run) > 1 else [run]
            out.extend(grams + ([ch for ch in run if _IDEOGRAPH.match(ch)] if len(run) > 1 else []))
        elif run not in _STOPWORDS and (len(run) > 1 or run.isdigit()) and len(run) <= _MAX_TOKEN_CHARS:
            out.append(_STEMMER.stemWord(run) if run.isascii() and run.isalpha() else run)
    return " ".join(out)


def _retokenise(table: str, text_sql: str) -> None:
    # search_text is derived data; re-derive it with the tokenizer of this release (English stemming).
    bind = op.get_bind()
    last = None
    while True:
        rows = bind.execute(
            sa.text(
                f"SELECT id, {text_sql} AS body FROM {table} WHERE (CAST(:last AS uuid) IS NULL OR id > :last) ORDER BY id LIMIT {BATCH}"
            ),
            {"last": last},
        ).all()
        if not rows:
            return
        bind.execute(
            sa.text(f"UPDATE {table} SET search_text = :s WHERE id = :id"), [{"id": r.id, "s": search_text(r.body)} for r in rows]
        )
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
