"""The context's messages kept between steps (app/chat/context_messages.py): a step reads only what was written since
the last one, and sees what any process wrote, exactly as a fresh read would."""

import asyncio
import uuid
from datetime import UTC, datetime

from app import db
from app.agents.models import Agent
from app.auth.models import DEFAULT_TENANT_ID
from app.chat.context_messages import KeptContexts
from app.llm.embeddings import Embedder
from app.main import create_app
from app.memory.models import Message
from app.memory.recall.service import RecallMemory
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.service import checked_client

UNCHANGED = datetime(2024, 1, 1, tzinfo=UTC)  # the agents' updated_at as the contexts are kept: no message erased


def user_lines(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def test_two_services_on_one_database_each_prompt_every_turn_of_the_other(
    settings: Settings, embedder: Embedder, llm: ScriptedLLM
) -> None:
    llm.reset(fallback=tools(call("send_message", text="ok")))
    with (
        checked_client(create_app(settings, embedder=embedder)) as first,
        checked_client(create_app(settings, embedder=embedder)) as second,
    ):
        agent = first.post("/v1/agents", json={"name": "two services"}).json()
        said: list[str] = []
        for i, service in enumerate([first, second, first, first, second, first]):
            said.append(f"message {i}")
            asked = len(llm.requests)
            response = service.post(f"/v1/agents/{agent['id']}/chat", json={"message": said[-1]})
            assert response.status_code == 200, response.text
            assert user_lines(llm.requests[asked]) == said  # the other service's turns too, in order


def test_a_step_reads_only_what_was_written_since_and_equals_a_fresh_read(database_url: str) -> None:
    async def run() -> None:
        engine = db.create_engine(database_url)
        sessions = db.session_factory(engine)
        agent_id = uuid.uuid4()

        async def write(*contents: str) -> None:
            async with db.transaction(sessions) as session:
                for content in contents:
                    await RecallMemory(session).add(Message(agent_id=agent_id, role="user", content=content))

        async def since(kept: KeptContexts, start: int) -> list[Message]:
            async with sessions() as session:
                return (await kept.since(session, agent_id, start, UNCHANGED)).messages

        try:
            async with db.transaction(sessions) as session:
                session.add(Agent(id=agent_id, tenant_id=DEFAULT_TENANT_ID, name="kept"))
            kept, other_process = KeptContexts(), KeptContexts()
            await write("a", "b", "c")
            first = await since(kept, 0)
            await write("d")
            await since(other_process, 0)
            await write("e")  # written after the other process read
            again = await since(kept, 0)
            fresh = await since(KeptContexts(), 0)
            assert [m.content for m in again] == [m.content for m in fresh] == ["a", "b", "c", "d", "e"]
            assert all(old is new for old, new in zip(first, again, strict=False))  # not read again
            assert [m.content for m in await since(other_process, 0)] == ["a", "b", "c", "d", "e"]

            start = again[2].seq or 0  # old turns left the context: the start moves forward
            assert [m.content for m in await since(kept, start)] == ["c", "d", "e"]
            assert [m.content for m in await since(kept, 0)] == ["a", "b", "c", "d", "e"]  # and back: read again
        finally:
            await engine.dispose()

    asyncio.run(run())


def test_agents_least_recently_read_are_let_go_beyond_the_bound(database_url: str) -> None:
    async def run() -> None:
        engine = db.create_engine(database_url)
        sessions = db.session_factory(engine)
        agents = [uuid.uuid4() for _ in range(3)]
        try:
            async with db.transaction(sessions) as session:
                for agent_id in agents:
                    session.add(Agent(id=agent_id, tenant_id=DEFAULT_TENANT_ID, name=f"bounded {agent_id}"))
                await session.flush()
                for agent_id in agents:
                    for n in range(4):
                        await RecallMemory(session).add(Message(agent_id=agent_id, role="user", content=f"m{n}"))
            kept = KeptContexts(max_messages=8)

            async def first_message(agent_id: uuid.UUID) -> Message:
                async with sessions() as session:  # a session of its own: a row read again is a new object
                    return (await kept.since(session, agent_id, 0, UNCHANGED)).messages[0]

            read = [await first_message(agent_id) for agent_id in agents]
            # 12 messages over a bound of 8: the first agent was let go, the two others are still kept
            assert await first_message(agents[2]) is read[2]
            assert await first_message(agents[1]) is read[1]
            assert await first_message(agents[0]) is not read[0]
        finally:
            await engine.dispose()

    asyncio.run(run())


def test_what_was_kept_survives_the_rollback_of_the_read_that_kept_it(database_url: str) -> None:
    """A step's read is rolled back when its transaction fails (the database went away at commit): the messages it
    kept must still be readable at the next step, which reads on from the last of them."""

    async def run() -> None:
        engine = db.create_engine(database_url)
        sessions = db.session_factory(engine)
        agent_id = uuid.uuid4()
        try:
            async with db.transaction(sessions) as session:
                session.add(Agent(id=agent_id, tenant_id=DEFAULT_TENANT_ID, name="rolled back"))
                await session.flush()
                for content in ("a", "b"):
                    await RecallMemory(session).add(Message(agent_id=agent_id, role="user", content=content))
            kept = KeptContexts()
            async with sessions() as session:
                await kept.since(session, agent_id, 0, UNCHANGED)
                await session.rollback()
            async with db.transaction(sessions) as session:
                await RecallMemory(session).add(Message(agent_id=agent_id, role="user", content="c"))
            async with sessions() as session:
                assert [m.content for m in (await kept.since(session, agent_id, 0, UNCHANGED)).messages] == ["a", "b", "c"]
        finally:
            await engine.dispose()

    asyncio.run(run())
