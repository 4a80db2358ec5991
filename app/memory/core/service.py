"""Core memory: a few labelled, bounded blocks with every revision kept, always in the prompt; written by the agent's
tools and by the API, under the row lock (no lost update)."""

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal

from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import EngramError, NotFound, PreconditionFailed, Unprocessable
from app.memory.core.repository import BlockRepository
from app.memory.models import MemoryBlock, MemoryBlockRevision
from app.memory.schemas import DEFAULT_BLOCK_LIMIT, MAX_BLOCKS, BlockCreate
from app.models_base import utcnow

Source = Literal["agent", "api"]


class BlockOverLimit(Unprocessable):
    code = "block_over_limit"


class BlockReadOnly(EngramError):
    status_code = 403
    code = "block_read_only"


def over_limit_detail(block: MemoryBlock, new_length: int, source: Source) -> str:
    """What went wrong, and what the writer can do about it: the agent gets its tools, an API caller the API."""
    room = max(block.char_limit - len(block.value), 0)
    over = (
        f"core memory block '{block.label}' would hold {new_length} characters, over its limit of {block.char_limit} "
        f"({len(block.value)} used, {room} left)"
    )
    if source == "agent":
        return (
            f"{over}. Condense the block (rewrite it shorter with core_memory_update) "
            "or move details to archival memory with archival_memory_create."
        )
    return f'{over}. Send a shorter value, or raise the block\'s limit with "limit" in the same request.'


class CoreMemory:
    def __init__(self, session: AsyncSession):
        self.blocks = BlockRepository(session)

    async def blocks_of(self, agent_id: uuid.UUID) -> Sequence[MemoryBlock]:
        return await self.blocks.of_agent(agent_id)

    async def create_blocks(self, agent_id: uuid.UUID, specs: list[BlockCreate]) -> None:
        for spec in specs:
            if len(spec.value) > spec.limit:
                raise Unprocessable(f"block '{spec.label}' has {len(spec.value)} characters, over its limit of {spec.limit}")
            block = await self.blocks.add(
                MemoryBlock(
                    agent_id=agent_id,
                    label=spec.label,
                    value=spec.value,
                    char_limit=spec.limit,
                    description=spec.description,
                    read_only=spec.read_only,
                )
            )
            await self._record(block, "api", None)

    async def get(self, agent_id: uuid.UUID, label: str) -> MemoryBlock:
        block = await self.blocks.get(agent_id, label)
        if block is None:
            raise NotFound(f"agent has no core memory block '{label}'")
        return block

    async def write(
        self,
        agent_id: uuid.UUID,
        label: str,
        value: str | Callable[[str], str],
        *,
        source: Source,
        turn_id: uuid.UUID | None = None,
        expected_version: int | None = None,
        limit: int | None = None,
        description: str | None = None,
        read_only: bool | None = None,
        create: bool = False,
    ) -> MemoryBlock:
        """Replace a block's value; with `create`, make a new block instead (refused if it exists). Without it the
        block must exist: a mistyped label is a 404 naming the agent's blocks, never a new block. `value` may be an
        edit of the current value, applied under the row lock: no lost updates."""
        block = await self.blocks.get(agent_id, label, for_update=True)
        if block is None:
            block = await self._new_block(agent_id, label, create=create, expected_version=expected_version, limit=limit)
        elif create:
            raise PreconditionFailed(f"block '{label}' exists already")
        elif expected_version is not None and block.version != expected_version:
            raise PreconditionFailed(
                f"block '{label}' is at version {block.version}, not {expected_version}: reload it and retry"
            )
        elif source == "agent" and block.read_only:
            raise BlockReadOnly(f"core memory block '{label}' is read-only")
        if callable(value):
            value = value(block.value)
        if limit is not None:
            block.char_limit = limit
        if len(value) > block.char_limit:
            raise BlockOverLimit(over_limit_detail(block, len(value), source))
        if description is not None:
            block.description = description
        if read_only is not None:
            block.read_only = read_only
        block.value = value
        block.version += 1
        block.updated_at = utcnow()
        await self.blocks.add(block)
        await self._record(block, source, turn_id)
        return block

    async def _new_block(
        self, agent_id: uuid.UUID, label: str, *, create: bool, expected_version: int | None, limit: int | None
    ) -> MemoryBlock:
        """The block `write` makes where there is none, if it may: only with `create`, and within MAX_BLOCKS."""
        labels = [b.label for b in await self.blocks.of_agent(agent_id)]
        if not create:
            raise NotFound(f"the agent has no core memory block '{label}'; its blocks: {', '.join(labels)}")
        if expected_version is not None:
            raise PreconditionFailed(f"block '{label}' does not exist, so it cannot be at version {expected_version}")
        if len(labels) >= MAX_BLOCKS:
            raise Unprocessable(f"an agent has at most {MAX_BLOCKS} core memory blocks")
        return MemoryBlock(agent_id=agent_id, label=label, value="", char_limit=limit or DEFAULT_BLOCK_LIMIT, version=0)

    async def revision_value(self, agent_id: uuid.UUID, label: str, version: int) -> str:
        revision = next((r for r in await self.history(agent_id, label) if r.version == version), None)
        if revision is None:
            raise NotFound(f"block '{label}' has no version {version}")
        return revision.value

    async def history(self, agent_id: uuid.UUID, label: str) -> Sequence[MemoryBlockRevision]:
        return await self.blocks.history(await self.get(agent_id, label))

    async def as_of(self, agent_id: uuid.UUID, moment: datetime) -> list[tuple[MemoryBlock, MemoryBlockRevision]]:
        """The blocks that existed at `moment`, each with its revision of then."""
        return await self.blocks.as_of(agent_id, moment)

    async def _record(self, block: MemoryBlock, source: Source, turn_id: uuid.UUID | None) -> None:
        await self.blocks.add_revision(
            MemoryBlockRevision(
                agent_id=block.agent_id,
                block_id=block.id,
                version=block.version,
                value=block.value,
                source=source,
                turn_id=turn_id,
            )
        )


# A near-duplicate is decided on the text, never on cosine: multilingual-e5 gives 0.99+ to role swaps ("Alice owes
# Bob 20 dollars" / "Bob owes Alice 20 dollars": 0.997) and MiniLM 0.97 to "meeting on Monday" / "... Tuesday". A
# passage is a near-duplicate when its letters and digits, in order, equal a stored one's (it differs only in
# punctuation, spacing, case or width), so dropping it loses nothing. Cosine only picks the candidates to compare:
# such pairs measured 0.962-1.000 with e5 (the lowest: a trailing "!!"), above this floor.
