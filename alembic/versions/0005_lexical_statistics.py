"""Search at scale: BM25 statistics kept on write — per agent and table, the document count and token total, and
each term's document frequency, so that a search reads only its own terms instead of rescanning the agent's rows —
and vectors kept in their rows

Revision ID: 0005_lexical_statistics
Revises: 0004_embedding_space
Create Date: 2026-12-03

Statement-level triggers (with transition tables) keep them in the writing transaction, whatever writes: the API,
the agent's tools, an import, a cascade from a deleted agent. Each statement takes the agent's corpus row first,
so concurrent writers to one agent's memory queue there instead of deadlocking on term rows.
A document is a row with a non-empty `search_text` (tool results and system notes have none).

Vectors in their rows (STORAGE MAIN: inline unless a row could not fit a page otherwise): a 384-dimension vector is 1.5 kB, and with a passage's text a row passes
the 2 kB TOAST threshold, so PostgreSQL moved the vector, its largest value, out of line (floats do not compress).
Every distance computed outside the HNSW index — an exact scan, the fused scores — then read it back from the
TOAST table: 3.7 ms for 1,000 rows, against 0.4 ms inline. Rows stored before keep their layout until they are
updated (a re-embedding to another model updates every row).

Full-text indexes without the GIN pending list (fastupdate off): with it, new entries wait in an unsorted list
that every search scans until a vacuum merges it — 4-5 ms per search on a freshly written 14,000-row table,
0.1 ms after. Writes pay a little more instead; searches stay predictable.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

from alembic import op

revision: str = "0005_lexical_statistics"
down_revision: str | None = "0004_embedding_space"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("archival_passages", "messages")

# Rows of a transition table counted per agent, and their distinct terms per agent.
# `{rows}` is a transition table, a table, or a subquery (aliased: PostgreSQL before 16 requires it).
DOCS = "SELECT agent_id, count(*) AS docs, sum(token_count) AS tokens FROM {rows} AS r WHERE search_text <> '' GROUP BY agent_id"
TERMS = """
    SELECT agent_id, term, count(*) AS df
    FROM (SELECT DISTINCT r.id, r.agent_id, w.term
          FROM {rows} r CROSS JOIN LATERAL unnest(string_to_array(r.search_text, ' ')) AS w(term)
          WHERE r.search_text <> '') AS d
    GROUP BY agent_id, term"""


def add(rows: str) -> str:
    return f"""
    INSERT INTO lexical_corpus AS c (agent_id, source, docs, tokens)
    SELECT agent_id, TG_TABLE_NAME, docs, tokens FROM ({DOCS.format(rows=rows)}) AS s ORDER BY agent_id
    ON CONFLICT (agent_id, source) DO UPDATE SET docs = c.docs + excluded.docs, tokens = c.tokens + excluded.tokens;
    INSERT INTO lexical_terms AS t (agent_id, source, term, df)
    SELECT agent_id, TG_TABLE_NAME, term, df FROM ({TERMS.format(rows=rows)}) AS s ORDER BY agent_id, term
    ON CONFLICT (agent_id, source, term) DO UPDATE SET df = t.df + excluded.df;"""


def subtract(rows: str) -> str:
    return f"""
    UPDATE lexical_corpus AS c SET docs = c.docs - s.docs, tokens = c.tokens - s.tokens
    FROM ({DOCS.format(rows=rows)}) AS s WHERE c.agent_id = s.agent_id AND c.source = TG_TABLE_NAME;
    UPDATE lexical_terms AS t SET df = t.df - s.df FROM ({TERMS.format(rows=rows)}) AS s
    WHERE t.agent_id = s.agent_id AND t.source = TG_TABLE_NAME AND t.term = s.term;
    DELETE FROM lexical_terms AS t USING ({TERMS.format(rows=rows)}) AS s
    WHERE t.agent_id = s.agent_id AND t.source = TG_TABLE_NAME AND t.term = s.term AND t.df <= 0;"""


# An update counts only for rows whose text changed (re-embedding updates every row and changes none of them).
CHANGED = "(SELECT {side}.* FROM old_rows o JOIN new_rows n USING (id) WHERE o.search_text IS DISTINCT FROM n.search_text)"
BODIES = {
    "insert": add("new_rows"),
    "delete": subtract("old_rows"),
    "update": subtract(CHANGED.format(side="o")) + add(CHANGED.format(side="n")),
}
TRANSITIONS = {
    "insert": "NEW TABLE AS new_rows",
    "delete": "OLD TABLE AS old_rows",
    "update": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
}


def backfill(table: str) -> list[str]:
    """The statistics of the rows already stored in `table`, counted in one pass (also bench/search_scale.py's
    bulk load)."""
    return [
        f"INSERT INTO lexical_corpus (agent_id, source, docs, tokens) "
        f"SELECT agent_id, '{table}', docs, tokens FROM ({DOCS.format(rows=table)}) AS s",
        f"INSERT INTO lexical_terms (agent_id, source, term, df) "
        f"SELECT agent_id, '{table}', term, df FROM ({TERMS.format(rows=table)}) AS s",
    ]


def create_functions() -> None:
    """The statement-level trigger functions (also what migration 0017's downgrade restores)."""
    for event, body in BODIES.items():
        op.execute(
            f"CREATE FUNCTION lexical_statistics_{event}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN{body}\n    RETURN NULL;\nEND\n$$"
        )


def create_triggers(table: str) -> None:
    for event, transition in TRANSITIONS.items():
        op.execute(
            f"CREATE TRIGGER {table}_lexical_{event} AFTER {event.upper()} ON {table} "
            f"REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION lexical_statistics_{event}()"
        )


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN")
        op.execute(f"ALTER INDEX ix_{table}_tsv SET (fastupdate = off)")
        op.execute(f"SELECT gin_clean_pending_list('ix_{table}_tsv')")
    for name, columns in (("lexical_corpus", ("docs", "tokens")), ("lexical_terms", ("df",))):
        extra = [sa.Column("term", sa.Text, nullable=False)] if name == "lexical_terms" else []
        op.create_table(
            name,
            sa.Column("agent_id", UUID(as_uuid=True), sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
            sa.Column("source", sa.Text, nullable=False),  # the table: archival_passages or messages
            *extra,
            *[sa.Column(c, sa.BigInteger, nullable=False) for c in columns],
            sa.PrimaryKeyConstraint("agent_id", "source", *(["term"] if extra else [])),
        )
    create_functions()
    for table in TABLES:
        create_triggers(table)
        for statement in backfill(table):
            op.execute(statement)


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE EXTERNAL")
        op.execute(f"ALTER INDEX ix_{table}_tsv RESET (fastupdate)")
    for table in TABLES:
        for event in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER {table}_lexical_{event} ON {table}")
    for event in ("insert", "delete", "update"):
        op.execute(f"DROP FUNCTION lexical_statistics_{event}()")
    op.drop_table("lexical_terms")
    op.drop_table("lexical_corpus")
