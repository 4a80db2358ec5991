"""A request that only reads holds no transaction open: its statements commit by themselves (AUTOCOMMIT), so a
search waiting for its query's embedding leaves no backend 'idle in transaction' (and spares BEGIN and COMMIT). A
request that stores passages (one, a batch, an imported agent's) opens its transaction once they are embedded, as
does a step of a turn or a memory pass whose tools store or search."""

import asyncio
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

import asyncpg
import httpx2
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from testkit.embedders import Wrapping
from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.support.chat import block_value, chat, finished_pass
from tests.support.mcp import over_http, use
from tests.support.service import checked_client

T = TypeVar("T")


class Holding(Wrapping):
    """The test embedder, holding on to the passages and queries it is told to hold until the test has looked at the
    database (`asked` when it starts holding, on until `released`, at most 10 s)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        passages: Callable[[Sequence[str]], bool] = lambda _: False,
        queries: Callable[[str], bool] = lambda _: False,
    ) -> None:
        super().__init__(embedder)
        self.holds_passages, self.holds_query = passages, queries
        self.asked = threading.Event()
        self.released = threading.Event()
        self.released.set()  # held only while a test looks (`held_while_embedding` clears it)

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if self.holds_passages(texts):
            await self._hold()
        return await super().embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        if self.holds_query(text):
            await self._hold()
        return await super().embed_query(text)

    async def _hold(self) -> None:
        self.asked.set()
        await asyncio.to_thread(self.released.wait, 10)


async def _idle_in_transaction(database_url: str) -> int:
    """The transactions that sit idle throughout a look of 0.2 s (while the embedder holds on): a short one of the
    service's background work, seen between two statements, is not one held open while the embedder works."""
    connection = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://", 1))
    idle = "SELECT pid, xact_start FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'"
    try:
        first = {tuple(row) for row in await connection.fetch(idle)}
        await asyncio.sleep(0.2)
        return len(first & {tuple(row) for row in await connection.fetch(idle)})
    finally:
        await connection.close()


def held_while_embedding(slow: Holding, database_url: str | None, request: Callable[[], T]) -> tuple[int, T]:
    """How many backends sit 'idle in transaction' while `request` (run in a thread) waits on the slow embedder, and
    what it returned."""
    assert database_url
    slow.asked.clear()
    slow.released.clear()
    answers: list[T] = []
    asking = threading.Thread(target=lambda: answers.append(request()))
    asking.start()
    try:
        assert slow.asked.wait(timeout=10)  # the agent is looked up; the text is being embedded
        held = asyncio.run(_idle_in_transaction(database_url))
    finally:
        slow.released.set()
    asking.join(timeout=30)
    return held, answers[0]


def test_a_search_holds_no_transaction_while_its_query_is_embedded(settings: Settings, embedder: Embedder) -> None:
    slow = Holding(embedder, queries=lambda _: True)
    with checked_client(create_app(settings, embedder=slow)) as client:
        agent = client.post("/v1/agents", json={"name": f"reader {uuid.uuid4().hex[:8]}"}).json()
        base = f"/v1/agents/{agent['id']}/archival"
        assert client.post(base, json={"content": "The user's sister lives in Osaka."}).status_code == 201
        searched = held_while_embedding(slow, settings.database_url, lambda: client.get(base, params={"query": "sister?"}))
    assert (searched[0], searched[1].status_code) == (0, 200)


def test_a_recollection_holds_no_transaction_while_its_query_is_embedded(settings: Settings, embedder: Embedder) -> None:
    # A POST that only reads (its query is a body): run as a GET's read is, without BEGIN and COMMIT.
    slow = Holding(embedder, queries=lambda _: True)
    with checked_client(create_app(settings, embedder=slow)) as client:
        agent = client.post("/v1/agents", json={"name": f"recaller {uuid.uuid4().hex[:8]}"}).json()
        base = f"/v1/agents/{agent['id']}"
        assert client.post(f"{base}/archival", json={"content": "The user's sister lives in Osaka."}).status_code == 201
        held, recalled = held_while_embedding(
            slow, settings.database_url, lambda: client.post(f"{base}/recollection", json={"query": "Where does my sister live?"})
        )
    assert held == 0
    assert [m["content"] for m in recalled.json()["memories"]] == ["The user's sister lives in Osaka."]


def test_the_mcp_tools_that_search_hold_no_transaction_while_their_query_is_embedded(
    settings: Settings, embedder: Embedder
) -> None:
    slow = Holding(embedder, queries=lambda _: True)
    held: dict[str, int] = {}
    database_url = settings.database_url
    assert database_url
    with checked_client(create_app(settings, embedder=slow)) as client:
        agent = client.post("/v1/agents", json={"name": f"mcp reader {uuid.uuid4().hex[:8]}"}).json()
        assert client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "My sister lives in Osaka."}).status_code == 201

        async def search_with_each_tool() -> None:
            async with over_http(client) as session:
                for tool in ("search_archival_memory", "search_conversation_history", "recall_context"):
                    slow.asked.clear()
                    slow.released.clear()
                    called = asyncio.create_task(use(session, tool, agent_id=agent["id"], query="Where does my sister live?"))
                    try:
                        assert await asyncio.to_thread(slow.asked.wait, 10)
                        held[tool] = await _idle_in_transaction(database_url)
                    finally:
                        slow.released.set()
                    assert await called

        asyncio.run(search_with_each_tool())
    assert held == {"search_archival_memory": 0, "search_conversation_history": 0, "recall_context": 0}


def test_storing_passages_holds_no_transaction_while_they_are_embedded(settings: Settings, embedder: Embedder) -> None:
    # Nor a lock: superseding a passage locks the old one only once the new one's vector is ready.
    slow = Holding(embedder, passages=lambda _: True)
    held: dict[str, int] = {}
    with checked_client(create_app(settings, embedder=slow)) as client:
        agent = client.post("/v1/agents", json={"name": f"writer {uuid.uuid4().hex[:8]}"}).json()
        base = f"/v1/agents/{agent['id']}/archival"
        stored = client.post(base, json={"content": "The user's sister lives in Osaka."}).json()
        exported = client.get(f"/v1/agents/{agent['id']}/export", params={"embeddings": "false"}).json()

        def created(response: httpx2.Response) -> bool:
            return response.status_code == 201

        async def insert_over_mcp() -> bool:
            async with over_http(client) as session:
                inserted = await use(session, "insert_archival_memory", agent_id=agent["id"], content="The user plays go.")
                return not inserted["duplicate"]

        writes = {
            "POST …/archival": lambda: created(client.post(base, json={"content": "The user's brother lives in Kobe."})),
            "POST …/archival/batch": lambda: created(client.post(f"{base}/batch", json={"items": [{"content": "A cat, Tama."}]})),
            "POST …/supersede": lambda: created(
                client.post(f"{base}/{stored['id']}/supersede", json={"content": "The user's sister lives in Nagoya."})
            ),
            "Letta's create passage": lambda: (
                client.post(
                    f"/letta/v1/agents/agent-{agent['id']}/archival-memory", json={"text": "The user likes natto."}
                ).status_code
                == 200
            ),
            "MCP insert_archival_memory": lambda: asyncio.run(insert_over_mcp()),
            "POST /v1/agents/import": lambda: created(  # a copy of the agent: its passage embedded again
                client.post("/v1/agents/import", json=exported, params={"name": f"copy {uuid.uuid4().hex[:8]}"})
            ),
        }
        landed: dict[str, bool] = {}
        for name, write in writes.items():
            held[name], landed[name] = held_while_embedding(slow, settings.database_url, write)
        passages = client.get(base, params={"include_superseded": "true"}).json()["items"]
    assert held == dict.fromkeys(writes, 0)
    assert landed == dict.fromkeys(writes, True)
    assert {p["content"] for p in passages} == {  # each write landed (the superseded passage stays, closed)
        "The user's sister lives in Osaka.",
        "The user's brother lives in Kobe.",
        "A cat, Tama.",
        "The user's sister lives in Nagoya.",
        "The user likes natto.",
        "The user plays go.",
    }


def test_a_turns_step_reads_its_context_without_a_transaction(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    # The step's read (the agent, recollection's searches, the blocks, the messages) holds no transaction either:
    # its BEGIN and COMMIT were two round trips of every step. What it writes goes in the step's own transaction.
    block_reads: list[object] = []

    def record(conn: Connection, _cursor: object, statement: str, *_: object) -> None:
        if statement.lstrip().startswith("SELECT") and "FROM memory_blocks" in statement:
            block_reads.append(conn.get_execution_options().get("isolation_level"))

    with checked_client(create_app(settings, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": f"reader {uuid.uuid4().hex[:8]}"}).json()
        llm.reset(tools(call("core_memory_append", label="human", content="Lives in Osaka."), call("send_message", text="ok")))
        event.listen(Engine, "before_cursor_execute", record)
        try:
            turn = chat(client, agent, "I moved to Osaka.")
        finally:
            event.remove(Engine, "before_cursor_execute", record)
        human = block_value(client, agent, "human")
    assert turn["reply"] == "ok"
    assert "Lives in Osaka." in human  # the step's write landed
    # the context's read of the blocks, then the tool's read of the block it changes, in the step's transaction
    assert block_reads == ["AUTOCOMMIT", None]


def test_a_step_whose_tools_store_or_search_holds_no_transaction_while_they_embed(
    settings: Settings, embedder: Embedder, llm: ScriptedLLM
) -> None:
    # A step's calls run in one transaction (the step's messages and its writes land together); the texts they embed
    # are embedded before it opens. Storing a passage also asks for its query vector (to list related memories).
    created, superseding, passed = "The user's cat Tama is three.", "The user's cat is called Tama.", "The user rides a bike."
    related = "Tama sleeps on the sofa."  # embedded at once as a passage, held as the query of related memories
    searches = {"archival_memory_search": "the cat's name", "conversation_search": "what the cat is called"}
    # a tool's arguments are held, not the turn's messages (their vectors are computed meanwhile)
    held_passages, held_queries = {created, superseding, passed}, {related, *searches.values()}
    slow = Holding(embedder, passages=lambda texts: bool(held_passages.intersection(texts)), queries=held_queries.__contains__)
    held: dict[str, int] = {}
    with checked_client(create_app(settings, embedder=slow)) as client:
        agent = client.post("/v1/agents", json={"name": f"tool user {uuid.uuid4().hex[:8]}"}).json()
        base = f"/v1/agents/{agent['id']}"
        old = client.post(f"{base}/archival", json={"content": "The user's cat is called Mike."}).json()
        steps = {
            "archival_memory_create": call("archival_memory_create", content=created),
            "archival_memory_create (related)": call("archival_memory_create", content=related),
            "archival_memory_supersede": call("archival_memory_supersede", passage_id=old["id"], content=superseding),
            **{name: call(name, query=query) for name, query in searches.items()},
        }
        results = {}
        for name, step in steps.items():
            llm.reset(tools(step, call("send_message", text="ok")))
            held[name], turn = held_while_embedding(slow, settings.database_url, lambda: chat(client, agent, "About my cat."))
            results[name] = next(e for e in turn["events"] if e["type"] == "tool_result")
        handed = client.post(f"{base}/messages", json={"messages": [{"role": "user", "content": "I cycle to work."}]})
        assert handed.status_code == 201, handed.text
        # the pass's step stores a first fact (its transaction begins) before the one embedded slowly
        first = call("archival_memory_create", content="The user cycles to work.")
        llm.reset(tools(first, call("archival_memory_create", content=passed)), text("stored"))
        held["memory pass"], started = held_while_embedding(
            slow, settings.database_url, lambda: client.post(f"{base}/memory-pass")
        )
        memory_pass = finished_pass(client, agent, started.json()["pass_id"])
        passages = client.get(f"{base}/archival").json()["items"]
    assert held == dict.fromkeys([*steps, "memory pass"], 0)
    assert all(r["ok"] for r in results.values()), results
    assert "Tama" in results["archival_memory_search"]["result"]
    assert memory_pass["status"] == "completed"
    assert {p["content"] for p in passages} == {created, related, superseding, "The user cycles to work.", passed}
