"""Ready for a distribution by agent (Citus: `create_distributed_table(table, 'agent_id')`, docs/scaling.md), read
from the catalog of a migrated database and from the statements a turn sends: each table is distributed by its
agent or is a reference table (copied to every node); a distributed table's unique keys include agent_id; a foreign
key between distributed tables goes through agent_id (co-located rows); a reference table refers to no distributed
one; every statement a turn sends to a distributed table names the agent (routed to the one node holding its rows);
and a trigger on a distributed table is row-level and writes its row's agent's rows only."""

import asyncio
import re

from fastapi.testclient import TestClient
from sqlalchemy import event

from app.runtime import runtime
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.chat import chat
from tests.support.database import run_sql
from tests.support.service import app_of

# Copied to every node: small, written rarely, and referred to by the distributed tables. `agents` is one: its
# unique (tenant, name) spans agents, and a turn reads it but seldom writes it (a summary, the context's start).
REFERENCE = {"tenants", "api_keys", "embedding_space", "agents", "quota_counters"}
LOCAL = {"alembic_version"}  # the coordinator's own
# A write in a trigger's function names the row's agent: `agent_id = OLD.agent_id`, or NEW's row in what it inserts.
ROWS_AGENT = re.compile(r"agent_id\s*=\s*(OLD|NEW)\.agent_id|VALUES\s*\(NEW\.agent_id|NEW\.agent_id, TG_ARGV", re.IGNORECASE)
WRITE = re.compile(r"\b(INSERT INTO|UPDATE|DELETE FROM)\s+(\w+)", re.IGNORECASE)
# The service's own loops over every agent (multi-shard queries on Citus, not a turn's): own-index upkeep, the
# sweep of finished work, the import worker's list of pending jobs, replica checks, the usage tally.
BACKGROUND_LOOPS = {"engram-agent-indexes", "engram-sweep", "engram-imports", "engram-replicas", "engram-usage-tally"}
# A statement naming its agent: `agent_id = …`, `agent_id IN …`, `agent_id = ANY(…)`, or an INSERT giving it.
NAMES_AGENT = re.compile(r"agent_id\s*(=|IN\b)|^\s*INSERT INTO \w+ \([^)]*\bagent_id\b", re.IGNORECASE)


def distributed(url: str) -> set[str]:
    rows = run_sql(
        url,
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace "
        "AND c.relkind IN ('r', 'p') AND NOT c.relispartition",
    )
    return {name for (name,) in rows} - REFERENCE - LOCAL


def constraint_columns(url: str, oid: int, side: str) -> list[str]:
    """The columns of a constraint's `conkey` (its table) or `confkey` (the table it refers to), in order."""
    table = "conrelid" if side == "conkey" else "confrelid"
    rows = run_sql(
        url,
        f"SELECT a.attname FROM pg_constraint c CROSS JOIN LATERAL unnest(c.{side}) WITH ORDINALITY AS k(attnum, n) "
        f"JOIN pg_attribute a ON a.attrelid = c.{table} AND a.attnum = k.attnum WHERE c.oid = :oid ORDER BY k.n",
        {"oid": oid},
    )
    return [name for (name,) in rows]


def test_every_table_is_distributed_by_its_agent_or_a_reference_table(database_url: str) -> None:
    tables = distributed(database_url)
    assert {"archival_passages", "messages", "memory_blocks", "turns", "import_items"} <= tables
    for table in sorted(tables):
        rows = run_sql(
            database_url,
            "SELECT attnotnull FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attname = 'agent_id'",
            {"t": table},
        )
        assert rows == [(True,)], f"{table}: no agent_id NOT NULL to distribute it by (or list it in REFERENCE)"


def test_every_unique_key_of_a_distributed_table_includes_the_agent(database_url: str) -> None:
    tables = distributed(database_url)
    indexes = run_sql(
        database_url,
        "SELECT c.relname, i.indexrelid::regclass::text, "
        "ARRAY(SELECT a.attname FROM unnest(i.indkey) AS k(attnum) JOIN pg_attribute a "
        "      ON a.attrelid = i.indrelid AND a.attnum = k.attnum) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE i.indisunique AND NOT c.relispartition",
    )
    checked = [(table, index, columns) for table, index, columns in indexes if table in tables]
    assert len(checked) >= len(tables)  # a primary key each at least
    for table, index, columns in checked:
        assert "agent_id" in columns, f"{table}: the unique index {index} {columns} lacks agent_id"


def test_foreign_keys_are_co_located_and_reference_tables_refer_to_no_distributed_one(database_url: str) -> None:
    tables = distributed(database_url)
    keys = run_sql(
        database_url,
        "SELECT oid, conrelid::regclass::text, confrelid::regclass::text, conname FROM pg_constraint "
        "WHERE contype = 'f' AND connamespace = 'public'::regnamespace AND conparentid = 0",
    )
    between = [(oid, table, target, name) for oid, table, target, name in keys if table in tables and target in tables]
    assert len(between) >= 5  # a revision's block, a message's and an event's turn, an item's job, a successor
    for oid, table, target, name in between:
        own, theirs = constraint_columns(database_url, oid, "conkey"), constraint_columns(database_url, oid, "confkey")
        assert "agent_id" in own and theirs[own.index("agent_id")] == "agent_id", (
            f"{name}: {table} {own} -> {target} {theirs} does not go through agent_id"
        )
    for _, table, target, name in keys:
        if table in REFERENCE:
            assert target in REFERENCE, f"{name}: the reference table {table} refers to the distributed {target}"


def test_triggers_on_distributed_tables_are_row_level_and_write_their_rows_agent_only(database_url: str) -> None:
    """Citus fires a distributed table's triggers on its shards: a statement-level one may not reach another shard
    from there, and a row-level one (citus.enable_unsafe_triggers) only the shards of the row's agent."""
    tables = distributed(database_url)
    rows = run_sql(
        database_url,
        "SELECT c.relname, t.tgname, t.tgtype & 1 = 1, p.prosrc FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_proc p ON p.oid = t.tgfoid WHERE NOT t.tgisinternal AND t.tgparentid = 0",
    )
    on_distributed = [(table, name, per_row, source) for table, name, per_row, source in rows if table in tables]
    assert {name for _, name, _, _ in on_distributed} >= {"archival_passages_lexical_insert", "messages_lexical_delete"}
    assert [name for _, name, per_row, _ in on_distributed if not per_row] == []
    for _, name, _, source in on_distributed:
        for statement in source.split(";"):
            written = {target for _, target in WRITE.findall(statement)}
            if written & tables:
                assert ROWS_AGENT.search(statement), f"{name} writes {written & tables} without naming the row's agent"


def test_every_statement_of_a_turn_on_a_distributed_table_names_its_agent(
    client: TestClient, agent: dict, llm: ScriptedLLM, database_url: str
) -> None:
    """Memory read, each tool (core, archival, recall), the stored events, then the turn replayed, a block's
    revisions and an export: each statement filters by the agent or writes its rows, so that Citus sends it to the
    node holding the agent's rows alone."""
    tables = distributed(database_url)
    statements: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        task = asyncio.current_task()
        if task is None or task.get_name() not in BACKGROUND_LOOPS:
            statements.append(statement)

    llm.reset(
        tools(call("core_memory_append", label="human", content="Lives in Kyoto.")),
        tools(call("archival_memory_create", content="The user moved to Kyoto in May.")),
        tools(call("archival_memory_search", query="Where does the user live?")),
        tools(call("conversation_search", query="Kyoto")),
        tools(call("send_message", text="Noted: Kyoto.")),
    )
    engine = runtime(app_of(client)).engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        turn = chat(client, agent, "I moved to Kyoto in May.")
        assert turn["reply"] == "Noted: Kyoto."
        for read in (f"turns/{turn['turn_id']}", "memory/human/history", "export"):  # a replay, revisions, a backup
            assert client.get(f"/v1/agents/{agent['id']}/{read}").status_code == 200, read
    finally:
        event.remove(engine, "before_cursor_execute", note)
    touched = [s for s in statements if any(re.search(rf"\b{t}\b", s) for t in tables)]
    written = {t for t in tables if any(re.search(rf"INSERT INTO {t}\b", s) for s in touched)}
    assert {"turns", "turn_events", "messages", "archival_passages", "memory_block_revisions"} <= written
    unrouted = [s for s in touched if not NAMES_AGENT.search(s)]
    assert not unrouted, "statements of a turn that do not name its agent:\n" + "\n---\n".join(unrouted)
