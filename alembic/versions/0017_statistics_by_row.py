"""BM25 statistics kept by row triggers: each inserted, deleted or re-worded row of archival_passages and messages
adds or subtracts itself, where migration 0005's triggers fired once per statement over its transition tables.

Why: Citus fires a distributed table's triggers on the shards, and a statement-level one there may not reach
another shard (`cannot execute a distributed query from a query on a shard`); a row-level trigger may write a
co-located table when each of its statements names the row's agent, as these do (lexical_corpus and lexical_terms
are keyed by agent_id first). tests/db/test_citus_ready.py checks that no statement-level trigger is left.

What stays: the statistics move in the writing transaction, whatever writes (the API, the agent's tools, an import,
a cascade). Each row takes its agent's corpus row before any term row, so concurrent writers to one agent's table
queue there instead of deadlocking on term rows. The table is the trigger's argument: a row trigger on a
partitioned table fires on the partition, whose name TG_TABLE_NAME holds.

A row's distinct terms are the keys of its `term_counts` (migration 0013). They go in as one multi-row VALUES
written for the row: to Citus a single-shard statement like those of its row-trigger examples (an INSERT … SELECT
goes through its INSERT … SELECT planner instead; neither tried on a cluster here). One INSERT per term took 1.7
times as long for a batch of 1,000 passages. Against the statement-level triggers (bench/statistics_triggers.py,
medians of 5 rounds): inserts 0.96x in batches of 1,000 and 1.11x one per transaction; one DELETE of 500 rows 8.6x
(2 ms a row; the service deletes passages one at a time). A deleted row whose agent has no corpus row subtracts
nothing: deleting an agent drops its statistics first (AgentRepository.delete), and its rows then go without
touching a term row each.

Revision ID: 0017_statistics_by_row
Revises: 0016_keys_by_agent
Create Date: 2026-12-06
"""

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op

revision: str = "0017_statistics_by_row"
down_revision: str | None = "0016_keys_by_agent"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("archival_passages", "messages")
FUNCTION = "lexical_statistics_by_row"
BODY = """
DECLARE
    terms text[];
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.search_text <> '' THEN
        UPDATE lexical_corpus SET docs = docs - 1, tokens = tokens - OLD.token_count
        WHERE agent_id = OLD.agent_id AND source = TG_ARGV[0];
        IF FOUND THEN
            terms := ARRAY(SELECT jsonb_object_keys(OLD.term_counts));
            DELETE FROM lexical_terms WHERE agent_id = OLD.agent_id AND source = TG_ARGV[0] AND term = ANY(terms) AND df <= 1;
            UPDATE lexical_terms SET df = df - 1 WHERE agent_id = OLD.agent_id AND source = TG_ARGV[0] AND term = ANY(terms);
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.search_text <> '' THEN
        INSERT INTO lexical_corpus AS c (agent_id, source, docs, tokens) VALUES (NEW.agent_id, TG_ARGV[0], 1, NEW.token_count)
        ON CONFLICT (agent_id, source) DO UPDATE SET docs = c.docs + 1, tokens = c.tokens + excluded.tokens;
        IF NEW.term_counts <> '{}' THEN  -- a text of blanks has none (and EXECUTE takes no NULL)
            EXECUTE 'INSERT INTO lexical_terms AS t (agent_id, source, term, df) VALUES '
                || (SELECT string_agg(format('(%L::uuid, %L, %L, 1)', NEW.agent_id, TG_ARGV[0], term), ', ' ORDER BY term)
                    FROM jsonb_object_keys(NEW.term_counts) AS term)
                || ' ON CONFLICT (agent_id, source, term) DO UPDATE SET df = t.df + 1';
        END IF;
    END IF;
    RETURN NULL;
END"""

# The trigger names of migration 0005, kept (bench/search_scale.py turns them off for a bulk load by name).
# An update counts only when the text changed (re-embedding updates every row and changes none of them).
EVENTS = {
    "insert": "INSERT",
    "delete": "DELETE",
    "update": "UPDATE OF search_text",
}
WHEN = {"update": " WHEN (OLD.search_text IS DISTINCT FROM NEW.search_text)"}


def _statement_triggers() -> ModuleType:
    """Migration 0005, whose statement-level functions and triggers a downgrade restores."""
    path = Path(__file__).with_name("0005_lexical_statistics.py")
    spec = importlib.util.spec_from_file_location("lexical_statistics_0005", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    op.execute(f"CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $${BODY}$$")
    for table in TABLES:
        for event, fires_on in EVENTS.items():
            op.execute(f"DROP TRIGGER {table}_lexical_{event} ON {table}")
            op.execute(
                f"CREATE TRIGGER {table}_lexical_{event} AFTER {fires_on} ON {table} FOR EACH ROW"
                f"{WHEN.get(event, '')} EXECUTE FUNCTION {FUNCTION}('{table}')"
            )
    for event in EVENTS:
        op.execute(f"DROP FUNCTION lexical_statistics_{event}()")


def downgrade() -> None:
    statement_level = _statement_triggers()
    statement_level.create_functions()
    for table in TABLES:
        for event in EVENTS:
            op.execute(f"DROP TRIGGER {table}_lexical_{event} ON {table}")
        statement_level.create_triggers(table)
    op.execute(f"DROP FUNCTION {FUNCTION}()")
