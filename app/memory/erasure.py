"""Erasure by provenance: what goes with an erased message or passage. A passage drawn only from what is erased (its
`sources` all erased) is erased with it, and so on down the chain (a fact drawn from such a fact); a passage with a
source left stays, less the erased ones. Supersession is not provenance: superseding a passage takes nothing with
it, and erasing a passage makes what it superseded current again, as deleting one always has.

Set-wise, in the caller's transaction: one statement finds everything that goes (a recursive CTE over the GIN index
on `sources`), three more restore what it superseded, delete it and trim the sources of what stays. Every statement
names the agent: the tables are partitioned by it, and provenance never crosses agents."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import NotFound, Unprocessable
from app.memory.models import Message
from app.memory.recall.repository import MessageRepository

# Everything erased with `roots`: a passage whose sources are all erased joins them, and each round looks only at
# the passages drawn from what the last one added (`fresh`) and keeps the whole set in one row, so that a passage
# drawn from two erased things is found when its last one goes, whatever the order. A cycle (two passages drawn from
# each other, possible since a near-duplicate drawn again takes on the new one's sources) ends: no id joins twice.
CLOSURE = text("""
    WITH RECURSIVE closure(erased, fresh) AS (
        SELECT CAST(:roots AS uuid[]), CAST(:roots AS uuid[])
      UNION ALL
        SELECT c.erased || d.ids, d.ids FROM closure c
        CROSS JOIN LATERAL (
            SELECT array_agg(p.id) AS ids FROM archival_passages p
            WHERE p.agent_id = :agent_id AND p.sources <> '{}' AND p.sources && c.fresh AND p.sources <@ c.erased
            AND p.id <> ALL(c.erased)
        ) d
        WHERE d.ids IS NOT NULL
    )
    SELECT erased FROM closure ORDER BY cardinality(erased) DESC LIMIT 1
""")
# A deleted passage's predecessors are current again (unless they go too: the foreign key would only clear one half).
RESTORE = text("""
    UPDATE archival_passages SET valid_until = NULL, superseded_by = NULL
    WHERE agent_id = :agent_id AND superseded_by = ANY(CAST(:erased AS uuid[])) AND id <> ALL(CAST(:erased AS uuid[]))
""")
DELETE = text("""
    DELETE FROM archival_passages WHERE agent_id = :agent_id AND id = ANY(CAST(:erased AS uuid[])) RETURNING id
""")
TRIM = text("""
    UPDATE archival_passages
    SET sources = ARRAY(
        SELECT s FROM unnest(sources) WITH ORDINALITY AS u(s, n) WHERE s <> ALL(CAST(:erased AS uuid[])) ORDER BY n
    )
    WHERE agent_id = :agent_id AND sources <> '{}' AND sources && CAST(:erased AS uuid[])
    RETURNING id
""")
PASSAGE = text("SELECT id FROM archival_passages WHERE agent_id = :agent_id AND id = :id FOR UPDATE")


@dataclass(frozen=True)
class Erasure:
    """What went with an erased message or passage."""

    passages: list[uuid.UUID]  # drawn only from it, directly or down a chain: erased too
    trimmed: int  # drawn from it and from something that stays: kept, without it among their sources


@dataclass(frozen=True)
class ErasedMessage:
    message: Message  # as it was
    results: Sequence[Message]  # the results of its tool calls (an assistant message's), erased with it
    erasure: Erasure

    @property
    def ids(self) -> list[uuid.UUID]:
        return [self.message.id, *(r.id for r in self.results)]


async def erase_passage(session: AsyncSession, agent_id: uuid.UUID, passage_id: uuid.UUID) -> Erasure:
    """Delete a passage and what was drawn from it alone (404: not one of the agent's passages)."""
    if (await session.execute(PASSAGE, {"agent_id": agent_id, "id": passage_id})).first() is None:
        raise NotFound(f"no archival passage {passage_id}")
    return await _erase(session, agent_id, [passage_id])


async def erase_message(session: AsyncSession, agent_id: uuid.UUID, message_id: uuid.UUID) -> ErasedMessage:
    """Delete a message, the results of its tool calls, and the passages drawn from them alone (404: not one of the
    agent's messages; 422: a tool result, which goes only with the call it answers)."""
    messages = MessageRepository(session)
    message = await messages.get(agent_id, message_id)
    if message is None:
        raise NotFound(f"no message {message_id} for this agent")
    if message.role == "tool":
        call = await messages.call_of(agent_id, message)
        raise Unprocessable(
            f"message {message_id} is the result of a tool call, which the conversation cannot keep without it: "
            + (f"erase the call, message {call}, and its results go with it" if call else "it cannot be erased alone")
        )
    results = await messages.results_of(agent_id, message)
    ids = [message.id, *(r.id for r in results)]
    await messages.delete(agent_id, ids)
    return ErasedMessage(message, results, await _erase(session, agent_id, ids))


async def _erase(session: AsyncSession, agent_id: uuid.UUID, roots: list[uuid.UUID]) -> Erasure:
    """The passages among `roots` (messages, already deleted, or passages) and those drawn from them alone go."""
    params = {"agent_id": agent_id, "roots": roots}
    erased = list((await session.execute(CLOSURE, params)).scalar_one())
    params = {"agent_id": agent_id, "erased": erased}
    await session.execute(RESTORE, params)
    deleted = set((await session.execute(DELETE, params)).scalars())
    trimmed = len((await session.execute(TRIM, params)).all())
    return Erasure([p for p in erased if p in deleted and p not in roots], trimmed)
