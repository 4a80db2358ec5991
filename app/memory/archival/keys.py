"""Passage keys: a caller's own name for an archival passage, as a key-value store keeps one (LangGraph's store, a
service's "the user's preferences"). A key names one current passage of its agent; writing under it again
supersedes that passage, which keeps the key as the key's earlier version (the history `POST …/supersede` keeps),
and erasing the key erases every version of it."""

import uuid
from dataclasses import asdict, dataclass, replace
from typing import Literal

from app.errors import NotFound
from app.memory.archival.erasure import Erasure, erase_key
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.archival.timeline import supersede
from app.memory.models import ArchivalPassage


@dataclass(frozen=True)
class Put:
    passage: ArchivalPassage  # what the key holds now
    outcome: Literal["created", "superseded", "unchanged"]


def unchanged(current: ArchivalPassage, new: NewPassage) -> bool:
    """Whether `new` is the passage the key holds: every field as it would be stored (the text exactly: a key's value
    is read back as it was written; sources in any order), its date unless none is given (undated: now, which a
    repeat cannot be)."""
    return all(
        set(value) == set(current.sources) if name == "sources" else value == getattr(current, name)
        for name, value in new.columns().items()
    )


async def get(archival: ArchivalMemory, agent_id: uuid.UUID, key: str) -> ArchivalPassage:
    """The agent's current passage under `key` (404: none)."""
    current = (await archival.passages.with_keys(agent_id, [key])).get(key)
    if current is None:
        raise NotFound(f"no current archival passage holds key {key!r}")
    return current


async def put(archival: ArchivalMemory, agent_id: uuid.UUID, key: str, new: NewPassage) -> Put:
    """Store `new` under `key`, or supersede the key's current passage with it; the same passage again stores
    nothing. Writers of one key take turns (its lock, taken once the new text is embedded): of two first writes at
    once, one stores and the other supersedes or finds it unchanged."""
    new = replace(new, key=key)
    found = (await archival.passages.with_keys(agent_id, [key])).get(key)
    if found is not None and unchanged(found, new):
        return Put(found, "unchanged")
    vectors = await archival.embedder.embed_passages([new.content])
    await archival.passages.lock_keys(agent_id, [key])
    current = (await archival.passages.with_keys(agent_id, [key], for_update=True)).get(key)
    if current is None:
        [stored] = await archival.add(agent_id, [new], vectors=vectors)
        return Put(stored.passage, "created")
    if unchanged(current, new):
        return Put(current, "unchanged")
    stored = await supersede(archival, agent_id, current.id, vectors=vectors, **asdict(new))
    return Put(stored.passage, "superseded")


async def erase(archival: ArchivalMemory, agent_id: uuid.UUID, key: str) -> tuple[uuid.UUID, Erasure]:
    """Erase the key's passage, its earlier versions and what was drawn from them alone (app/memory/archival/erasure.py)."""
    await archival.passages.lock_keys(agent_id, [key])
    return await erase_key(archival, agent_id, key)
