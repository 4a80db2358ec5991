"""AsyncEngram against a served Engram: the same calls as Engram's, awaited (each call is written once for both
clients; these show the async runner running every kind of flow: one request, several, pauses, a stream, an error
handled inside a flow)."""

import asyncio
from pathlib import Path

import pytest
from engram_client import AsyncEngram, MessageDelta, NotFound, TurnCompleted

from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.clients.python.conftest import unique


async def test_agents_created_at_once_by_many_callers_are_one_agent(aengram: AsyncEngram) -> None:
    name = unique("raced")
    agents = await asyncio.gather(*(aengram.agents.get_or_create(name) for _ in range(5)))
    assert len({a.id for a in agents}) == 1
    assert (await aengram.agents.find(name)) == agents[0]
    await aengram.agents.delete(agents[0].id)
    with pytest.raises(NotFound):
        await aengram.agents.get(agents[0].id)


async def test_memory_of_every_kind_through_the_async_client(aengram: AsyncEngram, tmp_path: Path) -> None:
    agent = await aengram.agents.create(unique("async"))
    try:
        human = (await aengram.memory.get(agent.id))["human"]
        await aengram.memory.put(agent.id, "human", "Aiko, from Osaka", if_match=human.version)
        assert [r.value for r in (await aengram.memory.history(agent.id, "human")).items][0] == "Aiko, from Osaka"

        tokyo = await aengram.archival.add(agent.id, "Aiko lives in Tokyo.", occurred_at="2023-04-01", tags=["home"])
        await aengram.archival.supersede(agent.id, tokyo.id, "Aiko moved to Osaka.", occurred_at="2024-10-01")
        [matcha, _] = await aengram.archival.add_many(agent.id, ["Aiko likes matcha.", "Aiko runs on Sundays."])
        notes = tmp_path / "notes.jsonl"
        notes.write_text('{"content": "Aiko visited Nara in March."}\n{"content": "Aiko has a cat, Mochi."}\n')
        job = await aengram.archival.import_file(agent.id, notes, poll_interval=0.05)
        assert (job.status, job.done) == ("done", 2)
        assert [p.content for p in await aengram.archival.search(agent.id, "Where does Aiko live?", tags=["home"])] == [
            "Aiko moved to Osaka."
        ]
        assert (await aengram.archival.delete(agent.id, matcha.id)).id == matcha.id
        assert len((await aengram.archival.list(agent.id)).items) == 4  # Osaka, running, Nara, Mochi

        handed = await aengram.messages.add(agent.id, [{"role": "user", "content": "来週、京都で茶道の体験をします。"}])
        recollection = await aengram.recall(agent.id, "What am I doing in Kyoto next week?")
        assert "来週、京都で茶道の体験をします。" in recollection.text and "Aiko, from Osaka" in recollection.text
        assert (await aengram.messages.delete(agent.id, handed.message_ids[0])).erased_messages == handed.message_ids
        assert (await aengram.messages.list(agent.id)).items == []

        document = await aengram.agents.export(agent.id)
        copy = await aengram.agents.import_document(document, name=unique("async copy"))
        assert copy.passages == 5  # Tokyo is kept, superseded
        await aengram.agents.delete(copy.agent.id)
    finally:
        await aengram.agents.delete(agent.id)


async def test_a_turn_awaited_and_one_streamed(aengram: AsyncEngram, llm: ScriptedLLM) -> None:
    agent = await aengram.agents.create(unique("async chat"))
    try:
        llm.reset(
            tools(call("send_message", text="Hello, Aiko!")),
            tools(call("send_message", text="Still here, Aiko.")),
            text("Nothing new."),  # the memory pass's
        )
        turn = await aengram.chat(agent.id, "Hi, I'm Aiko.")
        assert turn.reply == "Hello, Aiko!" and await aengram.turns.get(agent.id, turn.turn_id) == turn
        events = [event async for event in aengram.chat_stream(agent.id, "Are you there?")]
        assert "".join(e.text for e in events if isinstance(e, MessageDelta)) == "Still here, Aiko."
        assert isinstance(events[-1], TurnCompleted) and events[-1].reply == "Still here, Aiko."
        assert (await aengram.turns.wait(agent.id, events[-1].turn_id)).status == "completed"
        passed = await aengram.memory_pass(agent.id)
        assert (await aengram.turns.wait(agent.id, passed.pass_id, poll_interval=0.05)).reply == "Nothing new."
    finally:
        await aengram.agents.delete(agent.id)
