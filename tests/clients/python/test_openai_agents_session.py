"""EngramSession (engram_client.openai_agents) against a served Engram: items added, read back (the latest, oldest
first), popped and cleared; a message kept as the text it says in recall memory, every other item (a tool call and
its output, a system message, one too long for one message) kept as given."""

from typing import Any

from agents import TResponseInputItem
from engram_client import Agent, AsyncEngram
from engram_client.openai_agents import EngramSession

WEATHER: list[Any] = [
    {"role": "user", "content": "What's the weather in Sapporo?"},
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Sapporo"}', "id": "fc_1"},
    {"type": "function_call_output", "call_id": "call_1", "output": "雪 snow, -4°C; " + "~" * 33_000},  # two messages
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is snowing in Sapporo.", "annotations": [], "logprobs": []}],
    },
    {"role": "system", "content": "Answer in one sentence."},
]
REPLY = {"role": "assistant", "content": "It is snowing in Sapporo."}  # the model's reply, as the text it says


async def test_items_are_read_back_in_order_the_messages_as_text_the_rest_as_given(aengram: AsyncEngram, agent: Agent) -> None:
    session = EngramSession(agent.id, client=aengram)
    assert session.session_id == str(agent.id) and await session.get_items() == []
    await session.add_items(WEATHER[:3])
    await session.add_items(WEATHER[3:])
    expected = [*WEATHER[:3], REPLY, WEATHER[4]]
    assert await session.get_items() == expected
    assert await session.get_items(limit=2) == expected[-2:]
    assert await session.get_items(limit=4) == expected[-4:]  # the tool's output whole, from its two messages
    assert await session.get_items(limit=0) == []
    assert await EngramSession(agent.id, client=aengram).get_items() == expected  # another session: the same conversation

    said = (await aengram.messages.list(agent.id, limit=200)).items[::-1]
    assert [(m.role, m.content) for m in said if not m.content.startswith("[agents-sdk item]")] == [
        ("user", "What's the weather in Sapporo?"),
        ("assistant", "It is snowing in Sapporo."),
    ]  # what recollection and search read: the conversation as said
    assert len(said) == 6 and all(len(m.content) <= 32_000 for m in said)
    recalled = await aengram.recall(agent.id, "How is the weather in Sapporo?", kinds=["recall"])
    assert "- user: What's the weather in Sapporo?" in recalled.text


async def test_the_latest_item_is_popped_with_its_messages_and_a_clear_forgets_them_all(
    aengram: AsyncEngram, agent: Agent
) -> None:
    session = EngramSession(agent.id, client=aengram)
    await session.add_items(WEATHER)
    assert await session.pop_item() == WEATHER[4]
    assert await session.pop_item() == REPLY
    assert await session.pop_item() == WEATHER[2]  # its two messages erased with it
    assert await session.get_items() == WEATHER[:2]
    assert len((await aengram.messages.list(agent.id)).items) == 2

    await session.clear_session()
    assert await session.get_items() == [] and (await aengram.messages.list(agent.id)).items == []
    assert await session.pop_item() is None


async def test_a_message_that_text_cannot_hold_as_given_is_kept_as_given(aengram: AsyncEngram, agent: Agent) -> None:
    kept: list[TResponseInputItem] = [
        {"role": "user", "content": "   "},  # blank: a message of recall memory holds words
        {"role": "assistant", "content": "[agents-sdk item] {}"},  # would read as an item
        {"role": "user", "content": [{"type": "input_text", "text": "Look:"}, {"type": "input_image", "image_url": "x"}]},  # type: ignore[misc, list-item]  # no detail: partial, kept as given
        {  # type: ignore[misc, list-item]  # no id, status, nor the citation's span and title: partial, kept as given
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "See [1].", "annotations": [{"type": "url_citation", "url": "u"}]}],
        },
        {"role": "user", "content": "x" * 32_001},  # longer than a message
    ]
    session = EngramSession(agent.id, client=aengram, session_settings={"limit": None})
    await session.add_items(kept)
    assert await session.get_items() == kept
    assert session.session_settings is not None and session.session_settings.limit is None
