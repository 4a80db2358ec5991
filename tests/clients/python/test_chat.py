"""chat, chat_stream, turns and memory passes through the client against a served Engram whose LLM is the scripted
one: a turn's reply, events and usage; its events streamed as they happen, the reply in deltas; a turn read back; an
LLM failure as the error it is; a turn sent again under its key while it runs, waited for."""

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from engram_client import Agent, Engram, LLMError, MessageDelta, MessageEvent, TurnCompleted, TurnStarted

from testkit.scripted_llm import ScriptedLLM, call, error, held, text, tools
from tests.clients.python.conftest import Statuses
from tests.support.chat import TOOL_THEN_REPLY

REPLY = "こんにちは、太郎さん！覚えておきますね。"


def test_a_turn_answers_with_its_reply_events_and_usage_and_is_read_back(engram: Engram, agent: Agent, llm: ScriptedLLM) -> None:
    llm.reset(
        tools(call("core_memory_append", label="human", content="名前: 太郎"), content="Remember the name."),
        tools(call("send_message", text=REPLY)),
    )
    turn = engram.chat(agent.id, "僕の名前は太郎です。")
    assert (turn.reply, turn.status, turn.stop_reason) == (REPLY, "completed", "end_turn")
    assert [e.type for e in turn.events] == TOOL_THEN_REPLY
    assert isinstance(turn.events[0], TurnStarted) and turn.events[0].message == "僕の名前は太郎です。"
    assert turn.usage.llm_calls == 2 and turn.usage.prompt_tokens > 0
    assert engram.memory.get(agent.id)["human"].value == "名前: 太郎"
    assert engram.turns.get(agent.id, turn.turn_id) == turn


def test_a_streamed_turn_yields_its_events_as_they_happen_the_reply_in_deltas(
    engram: Engram, agent: Agent, llm: ScriptedLLM
) -> None:
    llm.reset(tools(call("send_message", text=REPLY)))
    events = list(engram.chat_stream(agent.id, "こんにちは"))
    assert isinstance(events[0], TurnStarted) and isinstance(events[-1], TurnCompleted)
    deltas = [e for e in events if isinstance(e, MessageDelta)]
    assert len(deltas) > 1 and "".join(d.text for d in deltas) == REPLY
    [message] = [e for e in events if isinstance(e, MessageEvent)]
    assert message.text == REPLY and events.index(message) > events.index(deltas[-1])
    assert events[-1].reply == REPLY and [e.seq for e in events] == sorted(e.seq for e in events)
    # Replay keeps the final message, not the deltas.
    replayed = engram.turns.get(agent.id, events[-1].turn_id)
    assert [e.type for e in replayed.events] == [e.type for e in events if not isinstance(e, MessageDelta)]

    llm.reset(tools(call("send_message", text=REPLY)))
    whole = list(engram.chat_stream(agent.id, "もう一度", deltas=False))
    assert [e.type for e in whole] == ["turn_started", "tool_call", "tool_result", "message", "turn_completed"]


def test_an_llm_failure_is_an_llm_error_naming_the_turn_that_keeps_the_message(
    engram: Engram, agent: Agent, llm: ScriptedLLM
) -> None:
    llm.reset(error(500))
    with pytest.raises(LLMError) as failed:
        engram.chat(agent.id, "Are you there?")
    assert (failed.value.status, failed.value.code) == (502, "llm_error") and failed.value.turn_id is not None
    turn = engram.turns.get(agent.id, failed.value.turn_id)
    assert (turn.status, turn.stop_reason) == ("completed", "llm_error")
    assert [m.content for m in engram.messages.list(agent.id).items] == ["Are you there?"]


def test_a_memory_pass_is_started_and_waited_for(engram: Engram, agent: Agent, llm: ScriptedLLM) -> None:
    llm.reset(tools(call("send_message", text="Noted.")), text("Nothing to keep."))
    engram.chat(agent.id, "I had ramen for lunch.")
    started = engram.memory_pass(agent.id)
    finished = engram.turns.wait(agent.id, started.pass_id, poll_interval=0.05)
    assert isinstance(finished.events[0], TurnStarted) and finished.events[0].kind == "memory_pass"
    assert (finished.status, finished.reply) == ("completed", "Nothing to keep.")  # its closing line


def test_a_chat_sent_again_with_the_key_of_a_running_turn_waits_for_that_turn(
    engram: Engram, agent: Agent, llm: ScriptedLLM, statuses: Statuses
) -> None:
    gate = threading.Event()
    llm.reset(held(tools(call("send_message", text="Done, once.")), gate))
    key = uuid.uuid4().hex
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(engram.chat, agent.id, "A long question?", idempotency_key=key)
        while not engram.messages.list(agent.id).items:  # the turn has begun: its user message is stored
            time.sleep(0.02)
        threading.Timer(0.3, gate.set).start()
        again = engram.chat(agent.id, "A long question?", idempotency_key=key)  # 202: the turn so far, then waited for
        assert again == first.result() and again.reply == "Done, once."
    assert (f"POST /v1/agents/{agent.id}/chat", 202) in statuses and len(llm.requests) == 1
