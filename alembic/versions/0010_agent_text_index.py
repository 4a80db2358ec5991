"""Full-text search that stays within the agent: the agent in the text index, and short rows kept whole in their page

Revision ID: 0010_agent_text_index
Revises: 0009_import_jobs
Create Date: 2026-12-05

The GIN index now covers each row's lexemes plus one for its agent ("agent <uuid>", with a space no query token
can hold), and a search asks for (its terms) AND (its agent): GIN intersects the two posting lists and returns only
the agent's own rows, whatever the table holds. Before, a small agent's rows were checked one by one (linear in its
history) and a large agent's terms came back from every agent's rows. One recall search over 5,000 messages (8 such
agents): 25.4 ms checking the agent's rows, 20.9 ms through this index (bench/README.md, "The agent in the index").

Rows up to 4 kB stay whole in their page (toast_tuple_target): a message or passage with its 1.5 kB vector passes
the default 2 kB threshold, so PostgreSQL compressed or moved its text and lexemes out of line, and every
candidate's BM25 read them back (three buffer reads a row instead of one). Rows written before keep their layout
until they are rewritten.

The index is built in the migration's transaction: writes to the table wait for the build, reads do not (1.4 s
for 337,600 messages on 2 cores, against 1.0 s for the plain index).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010_agent_text_index"
down_revision: str | None = "0009_import_jobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("archival_passages", "messages")
# Repeated in app/memory/models.py (migrations never import the application).
AGENT_TSV = "(tsv || array_to_tsvector(ARRAY['agent ' || agent_id::text]))"


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"CREATE INDEX ix_{table}_agent_tsv ON {table} USING gin ({AGENT_TSV}) WITH (fastupdate = off)")
        op.execute(f"DROP INDEX ix_{table}_tsv")
        op.execute(f"ALTER TABLE {table} SET (toast_tuple_target = 4080)")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} RESET (toast_tuple_target)")
        op.execute(f"CREATE INDEX ix_{table}_tsv ON {table} USING gin (tsv) WITH (fastupdate = off)")
        op.execute(f"DROP INDEX ix_{table}_agent_tsv")
