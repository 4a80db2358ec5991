"""Erasure by provenance: what goes with an erased message or passage. A passage drawn only from what is erased (its
`sources` all erased) is erased with it, and so on down the chain (a fact drawn from such a fact); a passage with a
source left stays, less the erased ones. Supersession is not provenance: superseding a passage takes nothing with
it, and erasing a passage makes what it superseded current again, as deleting one always has. A key stays with one
current passage: an erased passage lets go of its key first; a passage it superseded under the key is current again
unless another of the key's versions is (a later one that stays, or the latest of those made current), and is then
superseded by that one.

Set-wise, in the caller's transaction: one statement finds everything that goes (PassageRepository.erased_with), four
more free its keys, restore what it superseded, delete it and drop it from the sources of what stays (and again, for
a passage a concurrent write drew from what goes, which that leaves with none: `_erase`)."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import NotFound, Unprocessable
from app.memory.archival.repository import PassageRepository
from app.memory.archival.service import ArchivalMemory
from app.memory.models import Message
from app.memory.recall.repository import MessageRepository


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


async def erase_passage(archival: ArchivalMemory, agent_id: uuid.UUID, passage_id: uuid.UUID) -> Erasure:
    """Delete a passage and what was drawn from it alone (404: not one of the agent's passages)."""
    if await archival.passages.get(agent_id, passage_id, for_update=True) is None:
        raise NotFound(f"no archival passage {passage_id}")
    return await _erase(archival.passages, agent_id, [passage_id])


async def erase_key(archival: ArchivalMemory, agent_id: uuid.UUID, key: str) -> tuple[uuid.UUID, Erasure]:
    """Delete the passage a key holds with every earlier version of it (what is forgotten is not current again, nor
    found `as_of` an earlier date) and what was drawn from them alone; the key's current passage, and what went with
    it, its earlier versions first (404: no current passage holds the key). The caller holds the key's lock."""
    passages = archival.passages
    versions = await passages.key_versions(agent_id, key)
    current = next((version for version, is_current in versions if is_current), None)
    if current is None:
        raise NotFound(f"no current archival passage holds key {key!r}")
    erasure = await _erase(passages, agent_id, [version for version, _ in versions])
    earlier = [version for version, _ in versions if version != current]
    return current, Erasure([*earlier, *erasure.passages], erasure.trimmed)


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
    return ErasedMessage(message, results, await _erase(PassageRepository(session), agent_id, ids))


async def _erase(passages: PassageRepository, agent_id: uuid.UUID, roots: list[uuid.UUID]) -> Erasure:
    """The passages among `roots` (messages, already deleted, or passages) and those drawn from them alone go.

    erased_with reads the passages committed when it runs, and only the roots are locked: a passage drawn from one
    that goes with them (not a root) may be committed before the delete, which waits for its writer's lock on that
    source (PassageRepository.source_times). drop_sources, a later statement, sees it: drawn from what went alone, it
    is left with no source, and goes in a next round, as erased_with would have taken it (and so on, until a round
    empties none)."""
    erased: list[uuid.UUID] = []
    deleted: set[uuid.UUID] = set()
    trimmed: set[uuid.UUID] = set()
    going = roots
    while going:
        closure = await passages.erased_with(agent_id, going)
        await passages.release_keys(agent_id, closure)
        await passages.restore_superseded(agent_id, closure)
        deleted |= await passages.delete(agent_id, closure)
        erased += closure
        dropped = await passages.drop_sources(agent_id, closure)
        trimmed |= {passage for passage, emptied in dropped.items() if not emptied}
        going = [passage for passage, emptied in dropped.items() if emptied]
    return Erasure([p for p in erased if p in deleted and p not in roots], len(trimmed - deleted))
