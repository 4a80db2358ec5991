"""Turns left `running` by a process that died are closed as `interrupted`, once nobody holds their agent's lock."""

import asyncio
import logging
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.chat.locks import lock_key_of
from app.chat.service import interrupt_turn, running_turns
from app.db import transaction
from app.delivery.relay import announce
from app.memory.recall.vectors import MessageVectors

log = logging.getLogger("engram.recovery")


SWEEP_SECONDS = 30.0


async def sweep(engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], vectors: MessageVectors) -> None:
    """Runs for the life of the process: a replica that died mid-turn is noticed by the others, not only at its
    own restart; message vectors lost on the way are computed again."""
    while True:
        await asyncio.sleep(SWEEP_SECONDS)
        try:
            await interrupt_orphaned_turns(engine, sessions)
            await vectors.fill_missing()
        except Exception:  # the database may be down; the next sweep tries again
            log.warning("sweep failed", exc_info=True)


async def interrupt_orphaned_turns(engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]) -> int:
    async with sessions() as session:
        running = await running_turns(session)
    closed = 0
    for turn in running:
        key = lock_key_of(turn.kind, turn.agent_id)
        async with engine.connect() as conn:
            free = (await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar()
            if not free:
                continue  # a live process is running this agent's turn
            try:
                async with transaction(sessions) as session:
                    completed = await interrupt_turn(session, turn.agent_id, turn.id)
                    if completed is None:
                        continue
                    await announce(session, uuid.uuid4(), turn.id, turn.agent_id, [completed.seq])  # every replica relays it
                    closed += 1
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                await conn.commit()
    if closed:
        log.warning("marked %d turn(s) left running by a stopped process as interrupted", closed)
    return closed
