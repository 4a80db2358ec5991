"""What the LLM sees, within a token budget: the system prompt (with core memory and the running summary) and the
messages since the agent's context start. Above the warning threshold the prompt carries a memory-pressure notice;
above the eviction threshold the oldest whole turns leave the context and a recursive summary takes their place.
Evicted messages stay in recall memory. Cuts fall only before a user message, so a tool call never loses its result."""

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.agents.service import move_context_start, running_agent
from app.chat import prompt
from app.chat.context_messages import KeptContexts
from app.chat.tools import CHAT_TOOLS
from app.chat.turn_state import TurnState
from app.db import reading, transaction
from app.errors import LLMError
from app.llm.chat import ChatModel
from app.llm.tokens import estimate_tokens, json_tokens
from app.llm.types import CompletionRequest
from app.memory.core.service import CoreMemory
from app.memory.models import Message
from app.models_base import utcnow
from app.settings import Settings

log = logging.getLogger("engram.turn")

TOOLS_TOKENS = json_tokens(CHAT_TOOLS.schemas)
SUMMARY_MAX_CHARS = 4000
UNSUMMARISED = re.compile(r"\n?\((\d+) earlier messages could not be summarised; find them with conversation_search\.\)$")
TRANSCRIPT_MESSAGE_CHARS = 1500

SUMMARY_INSTRUCTIONS = """\
You maintain the running summary of a long conversation between a user and an AI agent. Older messages are \
leaving the agent's context window; the summary is all the agent will see of them. Merge the previous summary \
with the messages below into one new summary of at most {limit} characters: facts about the user, decisions, \
commitments, open questions and the thread of the conversation, oldest first. Keep names, dates and numbers \
exact. Write in the language the conversation uses. Answer with the summary only."""


@dataclass
class ContextTokens:
    system: int
    tools: int
    messages: int
    total: int
    window: int


@dataclass
class ContextView:
    system: str
    messages: list[Message]
    tokens: ContextTokens
    message_tokens: list[int] = field(repr=False, default_factory=list)
    converted: list[dict[str, Any]] = field(repr=False, default_factory=list)  # self.messages in the OpenAI shape

    def openai_messages(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.system}, *self.converted]


async def load_context(
    session: AsyncSession,
    agent: Agent,
    settings: Settings,
    *,
    now: datetime,
    memories: str | None = None,
    kept: KeptContexts | None = None,
) -> ContextView:
    """`kept`: the contexts this process keeps between steps (a new one reads every message)."""
    blocks = await CoreMemory(session).blocks_of(agent.id)
    since_start = (
        await (kept or KeptContexts()).since(session, agent.id, agent.context_start_seq, agent.updated_at)
    ).well_formed()
    messages, converted, per_message = since_start.messages, since_start.converted, since_start.tokens
    window = settings.context_window_for(agent.model or settings.default_llm_model)
    system = prompt.system_prompt(agent, blocks, now, memories=memories)
    total = estimate_tokens(system) + TOOLS_TOKENS + sum(per_message)
    if total > settings.context_warn_fraction * window:
        system = prompt.system_prompt(agent, blocks, now, memories=memories, pressure=total / window)
        total = estimate_tokens(system) + TOOLS_TOKENS + sum(per_message)
    tokens = ContextTokens(estimate_tokens(system), TOOLS_TOKENS, sum(per_message), total, window)
    return ContextView(system, messages, tokens, per_message, converted)


def needs_eviction(view: ContextView, settings: Settings) -> bool:
    return view.tokens.total > settings.context_evict_fraction * view.tokens.window


def eviction_cut(view: ContextView, settings: Settings, keep_from_seq: int) -> int | None:
    """The seq of the user message where the context should start: the earliest turn boundary that brings the
    total under the target, or the latest one before keep_from_seq (the running turn) if none does."""
    target = settings.context_target_fraction * view.tokens.window
    removed = 0
    cut: int | None = None
    for message, tokens in zip(view.messages, view.message_tokens, strict=True):
        seq = message.seq or 0
        if seq > keep_from_seq:
            break
        if message.role == "user" and removed > 0:
            cut = seq
            if view.tokens.total - removed <= target:
                break
        removed += tokens
    return cut


def transcript(messages: list[Message]) -> str:
    lines = []
    for message in messages:
        said = message.recall_text() if message.role != "tool" else f"[{message.name} → {message.content}]"
        if said:
            lines.append(f"{message.role}: {said[:TRANSCRIPT_MESSAGE_CHARS]}")
    return "\n".join(lines)


def summary_request(previous: str | None, evicted: list[Message]) -> list[dict[str, Any]]:
    body = f"Previous summary:\n{previous or '(none)'}\n\nMessages leaving the context:\n{transcript(evicted)}"
    return [
        {"role": "system", "content": SUMMARY_INSTRUCTIONS.format(limit=SUMMARY_MAX_CHARS)},
        {"role": "user", "content": body},
    ]


def fallback_summary(previous: str | None, evicted: list[Message]) -> str:
    """The previous summary and one pointer to recall memory for every message no summary took in, within
    SUMMARY_MAX_CHARS: an LLM that never summarises must not grow the prompt with a line per eviction."""
    kept, count = previous or "", len(evicted)
    if pointer := UNSUMMARISED.search(kept):
        kept, count = kept[: pointer.start()], count + int(pointer.group(1))
    note = unsummarised(count)
    kept = kept[: SUMMARY_MAX_CHARS - len(note) - 1]
    return f"{kept}\n{note}" if kept else note


def unsummarised(count: int) -> str:
    """The summary's pointer to recall memory for `count` messages it does not tell of (UNSUMMARISED reads it back)."""
    return f"({count} earlier messages could not be summarised; find them with conversation_search.)"


# The turn's memories for the prompt, given the read session and the agent (the first step recollects them).
Memories = Callable[[AsyncSession, Agent], Awaitable[str | None]]


class ContextWindow:
    """The context of an agent's next step, fitted: read without a transaction; past the eviction threshold, the
    oldest whole turns leave it for the summary (written by the LLM, a pointer to recall memory where it fails) and
    the agent's context start moves on. Keeps the agents' recent contexts between steps (KeptContexts)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], settings: Settings, llm: ChatModel | None):
        self.sessions = sessions
        self.settings = settings
        self.llm = llm
        self.kept = KeptContexts()

    async def fit(self, state: TurnState, keep_from_seq: int, memories: Memories) -> tuple[Agent, ContextView] | None:
        """The agent and its context for the next step (None: the agent was deleted meanwhile); `keep_from_seq`: the
        turn's own first message, which never leaves the context."""
        async with reading(self.sessions) as session:
            agent = await running_agent(session, state.agent_id)
            if agent is None:
                self.kept.forget(state.agent_id)
                return None
            recalled = await memories(session, agent)  # in the same read as the context
            view = await load_context(session, agent, self.settings, now=utcnow(), memories=recalled, kept=self.kept)
        cut = eviction_cut(view, self.settings, keep_from_seq) if needs_eviction(view, self.settings) else None
        if cut is None:
            return agent, view
        evicted = [m for m in view.messages if (m.seq or 0) < cut]
        summary = await self._summarise(state, agent, evicted)
        async with transaction(self.sessions) as session:
            agent = await move_context_start(session, state.agent_id, summary, cut)
            if agent is None:
                self.kept.forget(state.agent_id)
                return None
            view = await load_context(session, agent, self.settings, now=utcnow(), memories=recalled, kept=self.kept)
        log.info("agent %s: %d messages left the context for the summary", agent.id, len(evicted))
        return agent, view

    async def _summarise(self, state: TurnState, agent: Agent, evicted: list[Message]) -> str:
        assert self.llm is not None
        try:
            completion = await self.llm.complete(
                CompletionRequest(summary_request(agent.summary, evicted), [], agent.model, budget_seconds=state.budget_left())
            )
        except LLMError:
            log.warning("summary of %d evicted messages failed; keeping a pointer to recall memory", len(evicted))
            return fallback_summary(agent.summary, evicted)
        state.count(completion)
        return completion.content.strip()[:SUMMARY_MAX_CHARS] or fallback_summary(agent.summary, evicted)
