"""SQL for turns and their stored events."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat.events import Event, event_adapter
from app.chat.models import Turn, TurnEvent

RUNNING_PASS = "kind = 'memory_pass' AND status = 'running'"  # the partial unique index ux_turns_one_running_pass


@dataclass(frozen=True)
class Copies:
    """What a turn's record holds of one of its messages: the user's message, or an assistant's monologue, the
    texts it sent and its calls (by id)."""

    said: str | None = None
    monologue: str | None = None
    sent: Sequence[str] = ()
    calls: Sequence[str] = ()


# Events holding one of `Copies`, rewritten: the user's message, a monologue, a sent text, a call's arguments and
# result, the reply (given whole: the turn's, less the texts sent).
ERASE_FROM_EVENTS = """
    UPDATE turn_events SET payload = CASE payload->>'type'
        WHEN 'turn_started' THEN jsonb_set(payload, '{message}', to_jsonb(CAST(:erased AS text)))
        WHEN 'tool_call' THEN jsonb_set(payload, '{arguments}', '{}'::jsonb)
        WHEN 'tool_result' THEN jsonb_set(payload, '{result}', to_jsonb(CAST(:erased AS text)))
        WHEN 'turn_completed' THEN jsonb_set(payload, '{reply}', to_jsonb(CAST(:reply AS text)))
        ELSE jsonb_set(payload, '{text}', to_jsonb(CAST(:erased AS text)))
    END
    WHERE agent_id = :agent_id AND turn_id = :turn_id AND CASE payload->>'type'
        WHEN 'turn_started' THEN payload->>'message' = CAST(:said AS text)
        WHEN 'reasoning' THEN payload->>'text' = CAST(:monologue AS text)
        WHEN 'message' THEN payload->>'text' = ANY(CAST(:sent AS text[]))
        WHEN 'tool_call' THEN payload->>'call_id' = ANY(CAST(:calls AS text[]))
        WHEN 'tool_result' THEN payload->>'call_id' = ANY(CAST(:calls AS text[]))
        WHEN 'turn_completed' THEN CAST(:reply AS text) IS NOT NULL
        ELSE false
    END
"""


class TurnRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add(self, turn: Turn) -> Turn:
        self.session.add(turn)
        await self.session.flush()
        return turn

    async def get(self, agent_id: uuid.UUID, turn_id: uuid.UUID) -> Turn | None:
        query = select(Turn).where(col(Turn.agent_id) == agent_id, col(Turn.id) == turn_id)
        return (await self.session.scalars(query)).first()

    async def by_idempotency_key(self, agent_id: uuid.UUID, key: str) -> Turn | None:
        query = select(Turn).where(col(Turn.agent_id) == agent_id, col(Turn.idempotency_key) == key)
        return (await self.session.scalars(query)).first()

    async def add_events(self, turn_id: uuid.UUID, agent_id: uuid.UUID, events: list[dict[str, Any]]) -> None:
        self.session.add_all([TurnEvent(turn_id=turn_id, seq=e["seq"], agent_id=agent_id, payload=e) for e in events])
        await self.session.flush()

    async def events(self, agent_id: uuid.UUID, turn_id: uuid.UUID, after_seq: int = -1) -> list[Event]:
        """The turn's stored events after `after_seq`, in order, typed."""
        query = (
            select(TurnEvent)
            .where(col(TurnEvent.agent_id) == agent_id, col(TurnEvent.turn_id) == turn_id, col(TurnEvent.seq) > after_seq)
            .order_by(col(TurnEvent.seq))
        )
        return [event_adapter.validate_python(row.payload) for row in (await self.session.scalars(query)).all()]

    async def add_pass(self, turn: Turn) -> bool:
        """Store a memory pass unless one of its agent is running already (False then)."""
        query = (
            insert(Turn)
            .values(**turn.model_dump())
            .on_conflict_do_nothing(index_elements=["agent_id"], index_where=text(RUNNING_PASS))
            .returning(col(Turn.id))
        )
        return (await self.session.execute(query)).first() is not None

    async def running_pass(self, agent_id: uuid.UUID) -> Turn | None:
        query = select(Turn).where(col(Turn.agent_id) == agent_id, text(RUNNING_PASS))
        return (await self.session.scalars(query)).first()

    async def last_pass_through(self, agent_id: uuid.UUID) -> int:
        """The last message the agent's memory passes have gone over (0: none yet)."""
        query = select(func.max(Turn.through_seq)).where(col(Turn.agent_id) == agent_id, col(Turn.kind) == "memory_pass")
        return int((await self.session.scalar(query)) or 0)

    async def erase_from_record(self, agent_id: uuid.UUID, turn_id: uuid.UUID, copies: Copies, erased: str) -> None:
        """A turn's record without an erased message: its copies in the turn and its events are replaced by `erased`
        (the arguments of its calls by nothing)."""
        turn = await self.get(agent_id, turn_id)
        if turn is None:
            return
        if copies.said is not None and turn.message == copies.said:
            turn.message = erased
        for sent in copies.sent:
            if sent and turn.reply:  # an empty text is found between every two characters
                turn.reply = turn.reply.replace(sent, erased)
        self.session.add(turn)
        await self.session.execute(
            text(ERASE_FROM_EVENTS),
            {
                "agent_id": agent_id,
                "turn_id": turn_id,
                "erased": erased,
                "said": copies.said,
                "monologue": copies.monologue,
                "sent": list(copies.sent),
                "calls": list(copies.calls),
                "reply": turn.reply if copies.sent else None,
            },
        )

    async def erase_quotes(self, agent_id: uuid.UUID, since: datetime, quote: str, erased: str) -> None:
        """Tool results stored since `since` that quote `quote` (a search's answer) have it replaced by `erased`."""
        await self.session.execute(
            text("""
            UPDATE turn_events SET payload = jsonb_set(payload, '{result}', to_jsonb(replace(payload->>'result', :quote, :erased)))
            WHERE agent_id = :agent_id AND created_at >= :since AND payload->>'type' = 'tool_result'
            AND strpos(payload->>'result', :quote) > 0
        """),
            {"agent_id": agent_id, "since": since, "quote": quote, "erased": erased},
        )

    async def running(self) -> Sequence[Turn]:
        return (await self.session.scalars(select(Turn).where(col(Turn.status) == "running"))).all()
