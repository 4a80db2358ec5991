"""What every kind of turn (a chat turn, a memory pass) shares: its events, stored in the transaction that makes them
true and handed to the outlet once it has committed; its LLM usage and time budget; and one step's tool calls run
with their events."""

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat import tools
from app.chat.events import Event, StopReason, ToolCallEvent, ToolResultEvent, TurnCompleted, Usage, turn_status
from app.chat.repository import TurnRepository
from app.db import transaction
from app.errors import LLMError
from app.llm.chat import ChatModel, decode_arguments
from app.llm.embeddings import Embedder, EmbeddingError
from app.llm.embeddings.prepared import prepare
from app.llm.parsing import parse_text_tool_calls
from app.llm.types import Completion, ToolCall
from app.memory.search.baseline import embed_cohorts
from app.models_base import utcnow
from app.settings import Settings

log = logging.getLogger("engram.turn")


class EventOutlet(Protocol):
    """Where a turn's events go besides its store (app/delivery): told of them inside the transaction that stores
    them, handed them once it has committed."""

    async def stored(self, session: AsyncSession, turn_id: uuid.UUID, agent_id: uuid.UUID, events: Sequence[Event]) -> None: ...

    def committed(self, events: Sequence[Event]) -> None: ...

    def live(self, event: Event) -> None:
        """An event that is never stored (a reply's delta), handed on at once."""

    def wants_deltas(self, agent_id: uuid.UUID) -> bool:
        """Whether a watcher of the agent wants the reply's deltas (else the LLM's answer is asked for whole)."""


@dataclass(frozen=True)
class TurnServices:
    """What running a turn of any kind takes."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    embedder: Embedder
    llm: ChatModel | None  # None: no LLM configured (turns are refused)
    outlet: EventOutlet
    settings: Settings


@dataclass
class TurnResult:
    turn_id: uuid.UUID
    events: list[Event]  # in order; a finished turn's last one is turn_completed


@dataclass
class TurnState:
    agent_id: uuid.UUID
    turn_id: uuid.UUID
    outlet: EventOutlet
    events: list[Event] = field(default_factory=list)
    unsaved: list[Event] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    deadline: float = 0.0  # time.monotonic() by which the turn's LLM calls must be done
    steps: int = 0
    # The next event's seq. Live events (deltas) take theirs too: a watcher sees seq rise with every event, and
    # replay, which has only the stored ones, keeps their order.
    next_seq: int = 0
    concluded: bool = field(default=False, init=False)  # the closing event and the outcome are stored
    _closing: Event | None = field(default=None, init=False, repr=False)  # the closing event, until its transaction commits

    def budget_left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise LLMError("the turn used up its time budget (ENGRAM_TURN_TIMEOUT_SECONDS)")
        return left

    def count(self, completion: Completion) -> None:
        self.usage.llm_calls += 1
        self.usage.prompt_tokens += completion.prompt_tokens
        self.usage.completion_tokens += completion.completion_tokens

    def emit(self, event_type: type[Any], /, **fields: Any) -> Event:
        """Record an event; it is stored and goes live with the next committing() transaction."""
        event = self._stamped(event_type, fields)
        self.events.append(event)
        self.unsaved.append(event)
        return event

    def emit_live(self, event_type: type[Any], /, **fields: Any) -> None:
        """Hand an event to the watchers now, without storing it (a reply's delta: replay has the whole message)."""
        self.outlet.live(self._stamped(event_type, fields))

    def _stamped(self, event_type: type[Any], fields: dict[str, Any]) -> Event:
        event: Event = event_type(agent_id=self.agent_id, turn_id=self.turn_id, seq=self.next_seq, **fields)
        self.next_seq += 1
        return event

    @asynccontextmanager
    async def committing(self, sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
        """A transaction that also stores the turn's new events. Watchers see them only once it has committed,
        so what they saw is always what replay shows."""
        try:
            async with transaction(sessions) as session:
                yield session
                saving = list(self.unsaved)
                if saving:
                    await TurnRepository(session).add_events(
                        self.turn_id, self.agent_id, [e.model_dump(mode="json") for e in saving]
                    )
                    await self.outlet.stored(session, self.turn_id, self.agent_id, saving)
        except BaseException:
            if self._closing is not None:  # the outcome was not stored: the turn is not over, its close is undone
                self.events.remove(self._closing)
                self.next_seq = self._closing.seq
                if self._closing in self.unsaved:
                    self.unsaved.remove(self._closing)
                self._closing = None
            raise
        self.unsaved = self.unsaved[len(saving) :]
        self.concluded = self._closing is not None
        self.outlet.committed(saving)

    async def finish(
        self, sessions: async_sessionmaker[AsyncSession], stop: StopReason, reply: str, *, through_seq: int | None = None
    ) -> TurnResult:
        """The closing event and the turn's outcome, stored together in a transaction of their own — unless the turn
        was concluded already, in its last step's."""
        if not self.concluded:
            async with self.committing(sessions) as session:
                await self.conclude(session, stop, reply, through_seq=through_seq)
        return TurnResult(self.turn_id, self.events)

    async def conclude(self, session: AsyncSession, stop: StopReason, reply: str, *, through_seq: int | None = None) -> None:
        """The closing event and the turn's outcome in the caller's committing() transaction (nothing, when the agent
        was deleted meanwhile)."""
        self._closing = self.emit(TurnCompleted, stop_reason=stop, reply=reply, usage=self.usage)
        turn = await TurnRepository(session).get(self.agent_id, self.turn_id)
        if turn is not None:
            turn.status, turn.stop_reason, turn.reply = turn_status(stop), stop, reply
            turn.usage, turn.finished_at = self.usage.model_dump(), utcnow()
            if through_seq is not None:
                turn.through_seq = through_seq
            session.add(turn)
        else:
            self.unsaved.clear()  # the agent, and with it the turn, was deleted: nothing to store


def calls_of(completion: Completion, toolset: tools.Toolset) -> tuple[list[ToolCall], str]:
    """Native tool calls, or calls written as text; plus the inner monologue."""
    monologue = "\n".join(p for p in (completion.reasoning.strip(), completion.content.strip()) if p)
    if completion.tool_calls:
        return completion.tool_calls, monologue
    parsed = parse_text_tool_calls(completion.content, toolset.params)
    if not parsed:
        return [], monologue
    calls = [
        ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False))
        for c in parsed
    ]
    return calls, completion.reasoning.strip()


async def embedded_first(embedder: Embedder, toolset: tools.Toolset, calls: Sequence[ToolCall]) -> Embedder:
    """`embedder`, holding the vectors that `calls` (valid ones, of `toolset`) will ask for, computed now: before the
    step's transaction opens, so that it waits on no embedder. A text that cannot be embedded fails its own call."""
    passages: list[str] = []
    queries: list[str] = []
    cohorts = False
    for call in calls:
        tool = toolset.tools.get(call.name)
        if tool is None:
            continue
        try:
            embeds = tool.embeds(tool.args.model_validate(decode_arguments(call.arguments)))
        except ValueError:  # invalid arguments (ValidationError is one): the call fails without embedding
            continue
        passages += embeds.passages
        queries += embeds.queries
        cohorts = cohorts or embeds.cohorts
    if cohorts:
        try:
            await embed_cohorts(embedder)
        except EmbeddingError:
            log.warning("could not embed the baseline's cohorts; related memories are not listed this step", exc_info=True)
    return await prepare(embedder, passages, queries)


async def run_calls(
    state: TurnState, ctx: tools.ToolContext, toolset: tools.Toolset, step: int, calls: list[ToolCall]
) -> list[tuple[ToolCall, tools.ToolOutcome]]:
    """Execute one step's calls in order, each announced by its tool_call event and followed by its tool_result."""
    outcomes = []
    for call in calls:
        try:
            arguments = decode_arguments(call.arguments)
        except ValueError as exc:
            state.emit(ToolCallEvent, step=step, call_id=call.id, name=call.name, arguments={"_raw": call.arguments})
            outcome = tools.ToolOutcome(False, f"Error: {exc}", {})
        else:
            state.emit(ToolCallEvent, step=step, call_id=call.id, name=call.name, arguments=arguments)
            outcome = await tools.execute(ctx, call.name, arguments, toolset)
        state.emit(ToolResultEvent, step=step, call_id=call.id, name=call.name, ok=outcome.ok, result=outcome.result)
        outcomes.append((call, outcome))
    return outcomes
