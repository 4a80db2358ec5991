"""client.messages and client.recall against a served Engram: a conversation handed in (retried safely, with a memory
pass the scripted LLM runs), listed and searched, a message forgotten with what was drawn from it; recollection by
query and by the recent conversation."""

from datetime import UTC, datetime

from engram_client import Agent, ConversationLine, Engram, NewMessage, ToolCallEvent

from testkit.scripted_llm import ScriptedLLM, call, text, tools

CONVERSATION = [
    {"role": "user", "content": "My sister Yuki works as a nurse in Sapporo.", "occurred_at": "2024-05-01", "id": "may-1:1"},
    {"role": "assistant", "content": "That sounds like demanding work!", "occurred_at": "2024-05-01", "id": "may-1:2"},
    {"role": "user", "content": "来週の金曜日、京都で茶道の体験をします。", "occurred_at": "2024-05-01", "id": "may-1:3"},
]


def test_a_conversation_handed_in_is_stored_once_listed_and_searched(engram: Engram, agent: Agent) -> None:
    handed = engram.messages.add(agent.id, CONVERSATION)
    assert (handed.stored, handed.already_stored, handed.memory_pass_id) == (3, 0, None)
    again = engram.messages.add(agent.id, [NewMessage.model_validate(m) for m in CONVERSATION])
    assert (again.stored, again.already_stored, again.message_ids) == (0, 3, handed.message_ids)

    listed = engram.messages.list(agent.id, limit=2)
    assert [m.content for m in listed.items] == [CONVERSATION[2]["content"], CONVERSATION[1]["content"]]  # newest first
    assert all(m.handed_in and m.occurred_at == datetime(2024, 5, 1, tzinfo=UTC) for m in listed.items)
    assert [m.content for m in engram.messages.list(agent.id, cursor=listed.next_cursor).items] == [CONVERSATION[0]["content"]]
    found = engram.messages.list(agent.id, query="Where does Yuki work?", limit=1).items
    assert [m.id for m in found] == [handed.message_ids[0]] and found[0].score is not None


def test_forgetting_a_message_erases_the_passages_drawn_from_it_alone(engram: Engram, agent: Agent) -> None:
    [yuki, *_] = engram.messages.add(agent.id, CONVERSATION).message_ids
    fact = engram.archival.add(agent.id, "The user's sister Yuki is a nurse.", sources=[yuki])
    erased = engram.messages.delete(agent.id, yuki)
    assert (erased.id, erased.erased_messages, erased.erased_passages) == (yuki, [yuki], [fact.id])
    assert (erased.sources_trimmed, erased.summary_withdrawn) == (0, False)
    assert [m.id for m in engram.messages.list(agent.id).items if m.id == yuki] == []


def test_a_memory_pass_over_a_hand_in_stores_what_the_model_distils(engram: Engram, agent: Agent, llm: ScriptedLLM) -> None:
    llm.reset(tools(call("archival_memory_create", content="Yuki is a nurse in Sapporo.")), text("Stored one fact."))
    handed = engram.messages.add(agent.id, CONVERSATION, memory_pass=True)
    assert handed.memory_pass_id is not None
    finished = engram.turns.wait(agent.id, handed.memory_pass_id, poll_interval=0.05)
    assert (finished.status, finished.stop_reason) == ("completed", "end_turn")
    assert [e.name for e in finished.events if isinstance(e, ToolCallEvent)] == ["archival_memory_create"]
    assert [p.content for p in engram.archival.list(agent.id).items] == ["Yuki is a nurse in Sapporo."]
    assert engram.turns.get(agent.id, handed.memory_pass_id) == finished


def test_recollection_hands_over_what_bears_on_the_message_and_nothing_else(engram: Engram, agent: Agent) -> None:
    engram.messages.add(agent.id, CONVERSATION)
    engram.archival.add(agent.id, "Aiko lives in Osaka.", occurred_at="2024-10-01")
    kyoto = engram.recall(agent.id, "What am I doing in Kyoto next week?")
    assert "[conversation, 2024-05-01]\n- user: 来週の金曜日、京都で茶道の体験をします。" in kyoto.text
    assert kyoto.chars <= 1500 and kyoto.memories[0].kind == "recall" and kyoto.memories[0].speaker == "user"
    assert engram.recall(agent.id, "What is the capital of France?").memories == []

    lives = engram.recall(agent.id, "Where does Aiko live?", kinds=["archival"], max_chars=300)
    assert [(m.kind, m.content) for m in lives.memories] == [("archival", "Aiko lives in Osaka.")]
    assert engram.recall(agent.id, "Where does Aiko live?", kinds=["archival"], as_of="2024-06-01").memories == []
    recent: list[ConversationLine | dict[str, str]] = [
        ConversationLine(role="assistant", content="How was your week?"),
        {"role": "user", "content": "Where does Aiko live?"},
    ]
    by_conversation = engram.recall(agent.id, messages=recent, kinds=["archival"])
    assert by_conversation.query == "How was your week?\nWhere does Aiko live?"  # a short line is read with the one before
    assert [m.content for m in by_conversation.memories] == ["Aiko lives in Osaka."]
