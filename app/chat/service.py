"""What the chat API reads besides running turns: a stored turn (replay) and the context the LLM would see; and the
stored turns as event delivery reads them (relay, recovery)."""

import uuid
from collections.abc import Sequence
from dataclasses import asdict

from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.chat.context import load_context
from app.chat.events import Event, TurnCompleted, Usage
from app.chat.models import Turn
from app.chat.repository import TurnRepository
from app.chat.schemas import ChatResponse, ContextRead, ContextTokensRead
from app.errors import NotFound
from app.memory.recall.service import RecallMemory
from app.memory.schemas import MessageRead
from app.models_base import utcnow
from app.settings import Settings


async def stored_turn(session: AsyncSession, agent_id: uuid.UUID, turn_id: uuid.UUID) -> ChatResponse:
    turns = TurnRepository(session)
    turn = await turns.get(agent_id, turn_id)
    if turn is None:
        raise NotFound(f"no turn {turn_id} for this agent")
    return ChatResponse.of(turn.id, await turns.events(agent_id, turn.id))


async def tokens_used(session: AsyncSession, agent_id: uuid.UUID, turn_id: uuid.UUID) -> int:
    """The LLM tokens a turn used, as the LLM reported them (0 for a turn that was never stored)."""
    turn = await TurnRepository(session).get(agent_id, turn_id)
    usage = Usage.model_validate(turn.usage) if turn is not None else Usage()
    return usage.prompt_tokens + usage.completion_tokens


async def turn_events(session: AsyncSession, agent_id: uuid.UUID, turn_id: uuid.UUID, after_seq: int = -1) -> list[Event]:
    return await TurnRepository(session).events(agent_id, turn_id, after_seq)


async def running_turns(session: AsyncSession) -> Sequence[Turn]:
    return await TurnRepository(session).running()


async def interrupt_turn(session: AsyncSession, agent_id: uuid.UUID, turn_id: uuid.UUID) -> TurnCompleted | None:
    """Close a turn that its process left running: its last event says `interrupted`, and so does the turn. The
    event, to announce; None when the turn is gone or no longer running."""
    turns = TurnRepository(session)
    current = await turns.get(agent_id, turn_id)
    if current is None or current.status != "running":
        return None
    events = await turns.events(agent_id, turn_id)
    completed = TurnCompleted(
        agent_id=agent_id,
        turn_id=turn_id,
        seq=(events[-1].seq + 1) if events else 0,
        stop_reason="interrupted",
        reply=current.reply or "",
        usage=Usage.model_validate(current.usage or {}),
    )
    await turns.add_events(turn_id, agent_id, [completed.model_dump(mode="json")])
    current.status, current.stop_reason, current.finished_at = "interrupted", "interrupted", utcnow()
    session.add(current)
    return completed


async def context_read(session: AsyncSession, agent: Agent, settings: Settings) -> ContextRead:
    view = await load_context(session, agent, settings, now=utcnow())
    window = view.tokens.window
    return ContextRead(
        system_prompt=view.system,
        summary=agent.summary,
        messages=[MessageRead.of(m) for m in view.messages],
        messages_out_of_context=await RecallMemory(session).count_before(agent.id, agent.context_start_seq),
        tokens=ContextTokensRead(
            **asdict(view.tokens),
            warn_at=int(settings.context_warn_fraction * window),
            evict_at=int(settings.context_evict_fraction * window),
        ),
    )
