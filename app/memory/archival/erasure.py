"""Erasure by provenance: what goes with an erased message or passage. A passage drawn only from what is erased (its
`sources` all erased) is erased with it, and so on down the chain (a fact drawn from such a fact); a passage with a
source left stays, less the erased ones. Supersession is not provenance: superseding a passage takes nothing with
it, and erasing a passage makes what it superseded current again, as deleting one always has. A key stays with one
current passage: an erased passage lets go of its key first; a passage it superseded under the key is current again
unless another of the key's versions is (a later one that stays, or the latest of those made current), and is then
superseded by that one.

Set-wise, in the caller's transaction: one statement finds everything that goes (a recursive CTE over the GIN index
on `sources`), four more free its keys, restore what it superseded, delete it and trim the sources of what stays
(and again, for a passage a concurrent write drew from what goes, which the trim leaves with none: `_erase`).
Every statement names the agent: the tables are partitioned by it, and provenance never crosses agents."""

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
# What goes holds no key from here on: its key's other versions may be current again (RESTORE).
RELEASE = text("""
    UPDATE archival_passages SET key = NULL
    WHERE agent_id = :agent_id AND id = ANY(CAST(:erased AS uuid[])) AND key IS NOT NULL
""")
# A deleted passage's predecessors are current again (unless they go too: the foreign key would only clear one half),
# each but a keyed one whose key has its heir: the key's current passage, or the latest of its versions restored here.
RESTORE = text("""
    WITH orphan AS (
        SELECT id, key, created_at FROM archival_passages
        WHERE agent_id = :agent_id AND superseded_by = ANY(CAST(:erased AS uuid[])) AND id <> ALL(CAST(:erased AS uuid[]))
    ), heir AS (
        SELECT o.id, COALESCE(
            (SELECT q.id FROM archival_passages q
             WHERE q.agent_id = :agent_id AND q.key = o.key AND q.superseded_by IS NULL),
            (SELECT n.id FROM orphan n WHERE n.key = o.key ORDER BY n.created_at DESC, n.id DESC LIMIT 1)
        ) AS id_of FROM orphan o
    )
    UPDATE archival_passages p
    SET superseded_by = NULLIF(h.id_of, p.id),
        valid_until = CASE WHEN h.id_of IS NULL OR h.id_of = p.id THEN NULL ELSE p.valid_until END
    FROM heir h WHERE p.agent_id = :agent_id AND p.id = h.id
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
    RETURNING id, sources = '{}' AS emptied
""")
PASSAGE = text("SELECT id FROM archival_passages WHERE agent_id = :agent_id AND id = :id FOR UPDATE")
VERSIONS = text("""
    SELECT id, superseded_by IS NULL AS current FROM archival_passages WHERE agent_id = :agent_id AND key = :key
    ORDER BY created_at DESC, id DESC FOR UPDATE
""")


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


async def erase_key(session: AsyncSession, agent_id: uuid.UUID, key: str) -> tuple[uuid.UUID, Erasure]:
    """Delete the passage a key holds with every earlier version of it (what is forgotten is not current again, nor
    found `as_of` an earlier date) and what was drawn from them alone; the key's current passage, and what went with
    it, its earlier versions first (404: no current passage holds the key). The caller holds the key's lock."""
    versions = (await session.execute(VERSIONS, {"agent_id": agent_id, "key": key})).all()
    current = next((v.id for v in versions if v.current), None)
    if current is None:
        raise NotFound(f"no current archival passage holds key {key!r}")
    erasure = await _erase(session, agent_id, [v.id for v in versions])
    return current, Erasure([*(v.id for v in versions if v.id != current), *erasure.passages], erasure.trimmed)


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
    """The passages among `roots` (messages, already deleted, or passages) and those drawn from them alone go.

    CLOSURE reads the passages committed when it runs, and only the roots are locked: a passage drawn from one that
    goes with them (not a root) may be committed before DELETE, which waits for its writer's lock on that source
    (repository.source_times). TRIM, a later statement, sees it: drawn from what went alone, it is left with no
    source, and goes in a next round, as CLOSURE would have taken it (and so on, until a round empties none)."""
    erased: list[uuid.UUID] = []
    deleted: set[uuid.UUID] = set()
    trimmed: set[uuid.UUID] = set()
    going = roots
    while going:
        params = {"agent_id": agent_id, "roots": going}
        closure = list((await session.execute(CLOSURE, params)).scalar_one())
        params = {"agent_id": agent_id, "erased": closure}
        await session.execute(RELEASE, params)
        await session.execute(RESTORE, params)
        deleted |= set((await session.execute(DELETE, params)).scalars())
        erased += closure
        rows = (await session.execute(TRIM, params)).all()
        trimmed |= {row.id for row in rows if not row.emptied}
        going = [row.id for row in rows if row.emptied]
    return Erasure([p for p in erased if p in deleted and p not in roots], len(trimmed - deleted))
