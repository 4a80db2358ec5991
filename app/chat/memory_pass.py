"""Sleep-time memory passes (Letta's sleep-time compute): the agent's own LLM, offered memory tools only (no
send_message), goes over what was said since the last pass (its own turns and conversations handed in) and keeps
memory: durable facts stored, dated when they were said and citing the lines they came from (app/chat/citations.py);
stale ones superseded; a core block rewritten whole within its limit. No hidden extraction model: the agent's model
decides, as it does in a turn.

A pass is a turn of its own kind (`kind` = memory_pass): stored with its events, streamed on the agent's event stream
and replayable like any turn, its usage counted. At most one runs per agent (a partial unique index on running passes;
asking again returns the running one). It never takes the agent's turn lock, so a user's turn never waits for it (at
most their LLM calls share the endpoint), and its block edits carry the version it read, as the API's If-Match does:
an edit made meanwhile by a turn or an admin is never overwritten.

Cost: one LLM call per step, at most ENGRAM_MAX_STEPS; a pass that stores a few facts and rewrites a block takes
2-4 calls, with a prompt of the instructions, core memory and the transcript (at most half the context window; what
does not fit is left to the next pass, which follows at once). An agent with nothing new said costs no call."""

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.agents.models import Agent
from app.agents.service import running_agent
from app.chat import tools
from app.chat.citations import MEMORY_PASS_TOOLS, reference, references
from app.chat.events import ErrorEvent, Reasoning, StopReason, TurnStarted
from app.chat.locks import AgentLocks, pass_lock_key
from app.chat.models import Turn
from app.chat.repository import TurnRepository
from app.chat.turn_state import TurnResult, TurnServices, TurnState, calls_of, embedded_first, run_calls
from app.db import transaction
from app.detached import DetachedTasks
from app.errors import LLMError, ServiceUnavailable
from app.llm.tokens import estimate_tokens
from app.llm.types import CompletionRequest, ToolCall
from app.memory.core.service import CoreMemory
from app.memory.kinds import RECALL
from app.memory.models import MemoryBlock, Message
from app.memory.recall.service import RecallMemory
from app.memory.recollection.prompt_text import core_section
from app.metrics import MEMORY_PASSES
from app.models_base import utcnow
from app.quotas.service import Meter

log = logging.getLogger("engram.memory_pass")

MAX_MESSAGES = 400  # per pass; more are left to the next one
MESSAGE_CHARS = 2000  # of one message in the transcript
TRANSCRIPT_SHARE = 0.5  # of the context window

INSTRUCTIONS = """\
You keep the long-term memory of {name}, an AI agent with persistent memory (Engram). This is not a conversation: \
nobody reads what you write, only your tool calls change anything. Below is what was said since the last memory \
pass, each message dated after its reference ([m1], [m2] …), and the agent's core memory as it is now.

Do this, then stop:
1. Store every durable fact in the conversation that memory does not hold yet (about the user and the people, \
places, plans, preferences and events in their life) with `archival_memory_create`: one self-contained fact per \
call, in the conversation's language, with `occurred_at` = the date of the message that says it and `sources` = \
the references of the messages it comes from. Skip small talk.
2. When a fact replaces one already stored (a move, a changed plan or preference), supersede the old one with \
`archival_memory_supersede` (its id: from the memories listed when you store, or from `archival_memory_search`; \
`sources` as when you store).
3. If core memory is out of date, rewrite that block whole with `core_memory_update`: current facts only, the most \
important first, within its limit, details left to archival memory.
When memory is up to date, answer with one line saying what you changed, without a tool call."""


class MemoryPasses:
    def __init__(self, services: TurnServices):
        self.locks = AgentLocks(services.engine, key=pass_lock_key)
        self.sessions = services.sessions
        self.embedder = services.embedder
        self.llm = services.llm
        self.outlet = services.outlet
        self.settings = services.settings
        self.tasks: DetachedTasks[TurnResult | None] = DetachedTasks()

    async def request(self, agent_id: uuid.UUID, meter: Meter | None = None, *, admit: bool = False) -> uuid.UUID:
        """Queue a pass over what was said since the last one; its id (the running pass's, if there is one). `meter`:
        the quotas its tokens count against (`admit`: and that admit it as a turn first)."""
        self.require_llm()
        if admit and meter is not None:
            await meter.admit_turn()
        while True:
            turn = Turn(agent_id=agent_id, kind="memory_pass", message="memory pass")
            async with transaction(self.sessions) as session:
                turns = TurnRepository(session)
                if await turns.add_pass(turn):
                    break
                running = await turns.running_pass(agent_id)
            if running is not None:
                return running.id
            # The running pass ended in between: ask again.
        self.tasks.spawn(self._run(agent_id, turn.id, meter), name=f"memory-pass-{turn.id}")
        return turn.id

    def require_llm(self) -> None:
        if self.llm is None:
            raise ServiceUnavailable("no LLM is configured: a memory pass runs the agent's LLM (see README: Connect an LLM)")

    async def after_turn(self, agent_id: uuid.UUID, meter: Meter | None) -> None:
        """Queue a pass once ENGRAM_MEMORY_PASS_EVERY_TURNS turns have run since the last one."""
        every = self.settings.memory_pass_every_turns
        if every <= 0 or self.llm is None:
            return
        try:
            async with self.sessions() as session:
                through = await TurnRepository(session).last_pass_through(agent_id)
                turns = await RecallMemory(session).count_user_turns_after(agent_id, through)
            if turns >= every:
                await self.request(agent_id, meter)
        except Exception:  # the turn has run: a pass not queued now is queued after the next one
            log.warning("could not queue the memory pass of agent %s", agent_id, exc_info=True)

    async def shutdown(self) -> None:
        """Passes in flight are cancelled (stored as cancelled): the next pass goes over their messages again."""
        await self.tasks.shutdown(0)

    async def _run(self, agent_id: uuid.UUID, turn_id: uuid.UUID, meter: Meter | None) -> TurnResult | None:
        state = TurnState(agent_id, turn_id, self.outlet, deadline=time.monotonic() + self.settings.turn_timeout_seconds)
        try:
            async with self.locks.hold(agent_id, self.settings.turn_lock_timeout_seconds):
                stop, reply, through_seq, more = await self._pass(state)
                result = await self._finish(state, stop, reply, through_seq)
        except asyncio.CancelledError:
            await asyncio.shield(self._finish(state, "cancelled", "", None))
            raise
        except Exception as exc:
            log.exception("memory pass %s of agent %s failed", turn_id, agent_id)
            state.emit(
                ErrorEvent, code="internal_error", detail=f"the memory pass stopped on an internal error: {type(exc).__name__}"
            )
            return await asyncio.shield(self._finish(state, "interrupted", "", None))
        finally:
            if meter is not None:
                await asyncio.shield(meter.spend_tokens(state.usage.prompt_tokens + state.usage.completion_tokens))
        if more:
            await self.request(agent_id, meter)
        return result

    async def _pass(self, state: TurnState) -> tuple[StopReason, str, int | None, bool]:
        """(how it stopped, its closing line, the last message it went over, whether more are waiting)."""
        assert self.llm is not None
        async with state.committing(self.sessions) as session:
            agent = await running_agent(session, state.agent_id)
            if agent is None:
                return "cancelled", "", None, False
            after = await TurnRepository(session).last_pass_through(state.agent_id)
            said = await RecallMemory(session).said_after(state.agent_id, after, limit=MAX_MESSAGES + 1)
            blocks = await CoreMemory(session).blocks_of(state.agent_id)
            window = self.settings.context_window_for(agent.model or self.settings.default_llm_model)
            lines = fitted_transcript(said[:MAX_MESSAGES], int(window * TRANSCRIPT_SHARE))
            through = said[len(lines) - 1].seq if lines else None
            state.emit(TurnStarted, kind="memory_pass", message=describe(said[: len(lines)]))
        if not lines:
            return "end_turn", "nothing new to remember", None, False
        more = len(lines) < len(said)
        conversation = pass_request(agent, blocks, lines, utcnow())
        ctx_versions = {b.label: b.version for b in blocks}
        cited = references(said[: len(lines)])
        for step in range(1, self.settings.max_steps + 1):
            state.steps = step
            try:
                completion = await self.llm.complete(
                    CompletionRequest(conversation, MEMORY_PASS_TOOLS.schemas, agent.model, budget_seconds=state.budget_left())
                )
            except LLMError as exc:
                state.emit(ErrorEvent, code="llm_error", detail=str(exc))
                return "llm_error", "", None, False
            state.count(completion)
            calls, monologue = calls_of(completion, MEMORY_PASS_TOOLS)
            if monologue:
                state.emit(Reasoning, step=step, text=monologue)
            if not calls:
                return "end_turn", monologue, through, more
            embedder = await embedded_first(self.embedder, MEMORY_PASS_TOOLS, calls)
            async with state.committing(self.sessions) as session:
                ctx = tools.ToolContext(
                    session=session,
                    embedder=embedder,
                    agent_id=state.agent_id,
                    turn_id=state.turn_id,
                    context_start_seq=agent.context_start_seq,
                    block_versions=ctx_versions,
                    references=cited,
                )
                outcomes = await run_calls(state, ctx, MEMORY_PASS_TOOLS, step, calls)
            conversation += step_messages(monologue, outcomes)
        return "max_steps", "", through, more

    async def _finish(self, state: TurnState, stop: StopReason, reply: str, through_seq: int | None) -> TurnResult:
        MEMORY_PASSES.labels(stop).inc()
        return await state.finish(self.sessions, stop, reply, through_seq=through_seq)


def fitted_transcript(said: Sequence[Message], budget_tokens: int) -> list[str]:
    """One line per message, oldest first, its reference and date before it (app/chat/citations.py), as many as fit
    in the budget (at least one)."""
    lines: list[str] = []
    used = 0
    for position, message in enumerate(said, 1):
        line = f"[{reference(position)}] {RECALL.quoted(message, MESSAGE_CHARS)}"
        used += estimate_tokens(line)
        if lines and used > budget_tokens:
            break
        lines.append(line)
    return lines


def describe(said: Sequence[Message]) -> str:
    if not said:
        return "memory pass: nothing new since the last one"
    first, last = said[0].occurred_at, said[-1].occurred_at
    return f"memory pass over {len(said)} message(s) said {span(first, last)}"


def span(first: datetime, last: datetime) -> str:
    return f"on {first:%Y-%m-%d}" if first.date() == last.date() else f"from {first:%Y-%m-%d} to {last:%Y-%m-%d}"


def pass_request(agent: Agent, blocks: Sequence[MemoryBlock], lines: list[str], now: datetime) -> list[dict[str, Any]]:
    system = "\n\n".join(
        [
            INSTRUCTIONS.format(name=agent.name),
            core_section(blocks),
            f"Current time: {now:%A %Y-%m-%d %H:%M %Z}",
        ]
    )
    transcript = "Said since the last memory pass:\n" + "\n".join(lines)
    return [{"role": "system", "content": system}, {"role": "user", "content": transcript}]


def step_messages(monologue: str, outcomes: list[tuple[ToolCall, tools.ToolOutcome]]) -> list[dict[str, Any]]:
    """A step as the LLM sees it on the next one: its calls, then their results."""
    calls = [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}} for call, _ in outcomes
    ]
    return [
        {"role": "assistant", "content": monologue or None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": call.id, "content": outcome.result} for call, outcome in outcomes),
    ]
