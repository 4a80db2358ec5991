"""The messages of agents' contexts, kept between steps and turns in this process: a step reads only what was
written since the agent's last one, not the whole context again. A 32,000-token window of short turns holds about
a thousand messages, and loading them as ORM rows took ~10 ms of every step.

Sound because an agent's own messages are append-only, and written only by its turns, which hold the agent's lock
across every process on the database (app/chat/locks.py) until they have committed: they commit in seq order, so
all that can be new is what has a higher seq than the last one read. Messages handed in from other conversations
(app/memory/recall/handed_in.py) are written without the lock, and are never part of the context. What is kept was read
from the database, never taken from a turn's own writes: a step that rolled back leaves nothing behind. Erasing a
message (app/chat/forgetting.py) is the one change to what was written: it moves the agent's `updated_at` on, and a
context kept under another `updated_at` is read again whole."""

import bisect
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat import prompt
from app.llm.tokens import message_tokens
from app.memory.models import Message
from app.memory.recall.service import RecallMemory

# Messages kept over all agents; the agents least recently in a turn go first beyond it.
MAX_KEPT_MESSAGES = 50_000


@dataclass
class ContextMessages:
    """An agent's messages from its context start, oldest first, each with its OpenAI shape and token estimate."""

    start_seq: int
    messages: list[Message] = field(default_factory=list)
    converted: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    changed_at: datetime | None = None  # the agent's updated_at when they were read

    def extend(self, messages: list[Message]) -> None:
        """New lists, not the old ones grown: a view handed out earlier keeps what it had."""
        converted = [prompt.to_openai(m) for m in messages]
        self.messages = [*self.messages, *messages]
        self.converted = [*self.converted, *converted]
        self.tokens = [*self.tokens, *(message_tokens(m) for m in converted)]

    def from_seq(self, start_seq: int) -> "ContextMessages":
        """The same messages from a later context start (old turns left the context for the summary)."""
        cut = bisect.bisect_left([m.seq or 0 for m in self.messages], start_seq)
        return ContextMessages(start_seq, self.messages[cut:], self.converted[cut:], self.tokens[cut:], self.changed_at)

    def well_formed(self) -> "ContextMessages":
        """Without a leading fragment (prompt.well_formed): the window starts at a user message."""
        kept = prompt.well_formed(self.messages)
        cut = len(self.messages) - len(kept)
        return ContextMessages(self.start_seq, kept, self.converted[cut:], self.tokens[cut:], self.changed_at)


class KeptContexts:
    def __init__(self, max_messages: int = MAX_KEPT_MESSAGES):
        self._agents: OrderedDict[uuid.UUID, ContextMessages] = OrderedDict()
        self._max_messages = max_messages
        self._held = 0

    async def since(self, session: AsyncSession, agent_id: uuid.UUID, start_seq: int, changed_at: datetime) -> ContextMessages:
        """The agent's messages with seq >= start_seq, reading only those after the ones kept (all of them when
        `changed_at`, the agent's updated_at, is not the one they were kept under)."""
        kept = self._agents.pop(agent_id, None)
        if kept is not None:
            self._held -= len(kept.messages)
        if kept is None or start_seq < kept.start_seq or changed_at != kept.changed_at:
            kept = ContextMessages(start_seq, changed_at=changed_at)  # never kept, the start moved back, or erased from
        elif start_seq > kept.start_seq:
            kept = kept.from_seq(start_seq)
        after = (kept.messages[-1].seq or 0) + 1 if kept.messages else start_seq
        read = await RecallMemory(session).since(agent_id, after)
        for message in read:  # kept as read: a rollback of this session would expire them, and the next step fail
            session.expunge(message)
        kept.extend(read)
        self._agents[agent_id] = kept
        self._held += len(kept.messages)
        while self._held > self._max_messages and len(self._agents) > 1:
            _, oldest = self._agents.popitem(last=False)
            self._held -= len(oldest.messages)
        return kept

    def forget(self, agent_id: uuid.UUID) -> None:
        if (kept := self._agents.pop(agent_id, None)) is not None:
            self._held -= len(kept.messages)
