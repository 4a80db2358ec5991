"""Core memory (bounded, versioned blocks), archival memory (embedded passages) and recall memory (every message):
the rules the API, the agent's tools and automatic recollection all go through."""

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple, TypedDict

from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import EngramError, NotFound, PreconditionFailed, Unprocessable
from app.llm.embeddings import Embedder
from app.memory import lexical, named_dates, named_speakers
from app.memory.hybrid import Hit
from app.memory.hybrid import Mode as Mode  # the services' callers name it: re-exported
from app.memory.models import ArchivalPassage, MemoryBlock, MemoryBlockRevision, Message
from app.memory.repository import CURRENT as CURRENT
from app.memory.repository import BlockRepository, MessageRepository, PassageMatch, PassageRepository
from app.memory.repository import Validity as Validity
from app.memory.schemas import DEFAULT_BLOCK_LIMIT, MAX_BLOCKS, BlockCreate
from app.models_base import utcnow
from app.pagination import decode_seq_cursor, decode_time_cursor, split_page

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
    ) -> tuple[MemoryBlock, bool]:
        """Replace a block's value (creating it for the API); returns (block, created). `value` may be an edit of the
        current value, applied under the row lock: no lost updates."""
        block = await self.blocks.get(agent_id, label, for_update=True)
        created = block is None
        if block is None:
            if source == "agent":
                labels = ", ".join(b.label for b in await self.blocks.of_agent(agent_id))
                raise NotFound(f"there is no core memory block '{label}'; blocks: {labels}")
            if expected_version is not None:
                raise PreconditionFailed(f"block '{label}' does not exist, so it cannot be at version {expected_version}")
            if len(await self.blocks.of_agent(agent_id)) >= MAX_BLOCKS:
                raise Unprocessable(f"an agent has at most {MAX_BLOCKS} core memory blocks")
            block = MemoryBlock(agent_id=agent_id, label=label, value="", char_limit=limit or DEFAULT_BLOCK_LIMIT, version=0)
        if expected_version is not None and block.version != expected_version:
            raise PreconditionFailed(
                f"block '{label}' is at version {block.version}, not {expected_version}: reload it and retry"
            )
        if source == "agent" and block.read_only:
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
        return block, created

    async def revision_value(self, agent_id: uuid.UUID, label: str, version: int) -> str:
        revision = next((r for r in await self.history(agent_id, label) if r.version == version), None)
        if revision is None:
            raise NotFound(f"block '{label}' has no version {version}")
        return revision.value

    async def history(self, agent_id: uuid.UUID, label: str) -> Sequence[MemoryBlockRevision]:
        return await self.blocks.history((await self.get(agent_id, label)).id)

    async def as_of(self, agent_id: uuid.UUID, moment: datetime) -> list[tuple[MemoryBlock, MemoryBlockRevision]]:
        """The blocks that existed at `moment`, each with its revision of then."""
        return await self.blocks.as_of(agent_id, moment)

    async def _record(self, block: MemoryBlock, source: Source, turn_id: uuid.UUID | None) -> None:
        await self.blocks.add_revision(
            MemoryBlockRevision(block_id=block.id, version=block.version, value=block.value, source=source, turn_id=turn_id)
        )


# A near-duplicate is decided on the text, never on cosine: multilingual-e5 gives 0.99+ to role swaps ("Alice owes
# Bob 20 dollars" / "Bob owes Alice 20 dollars": 0.997) and MiniLM 0.97 to "meeting on Monday" / "... Tuesday". A
# passage is a near-duplicate when its letters and digits, in order, equal a stored one's (it differs only in
# punctuation, spacing, case or width), so dropping it loses nothing. Cosine only picks the candidates to compare:
# such pairs measured 0.962-1.000 with e5 (the lowest: a trailing "!!"), above this floor.
NEAR_DUPLICATE_CANDIDATE_SIMILARITY = 0.9


@dataclass
class Stored:
    passage: ArchivalPassage
    duplicate: bool


class NewPassage(NamedTuple):
    content: str
    tags: list[str]
    occurred_at: datetime | None = None  # None: now


def same_text(a: ArchivalPassage, b: ArchivalPassage) -> bool:
    return lexical.fingerprint(a.content) == lexical.fingerprint(b.content)


def same_fact(stored: ArchivalPassage, candidate: ArchivalPassage, dated: datetime | None) -> bool:
    """The same text, and no date of its own (`dated`) that differs: the same words dated otherwise tell of another
    event (the gym on Monday, the gym on Friday)."""
    return same_text(stored, candidate) and (dated is None or stored.occurred_at == dated)


class _QuerySignals(TypedDict):
    terms: list[str]
    dates: list[tuple[datetime, datetime]]
    speakers: list[str]


def _what_the_query_names(query: str, asker: named_speakers.Asker) -> _QuerySignals:
    """What the hybrid statement ranks by besides the query's vector: its lexical terms, the dates and the speakers
    it names (`asker`: who wrote it, named_speakers.speakers)."""
    return {
        "terms": lexical.query_terms(query),
        "dates": named_dates.spans(query),
        "speakers": named_speakers.speakers(query, asker),
    }


class ArchivalMemory:
    def __init__(self, session: AsyncSession, embedder: Embedder):
        self.passages = PassageRepository(session)
        self.embedder = embedder

    async def add(
        self,
        agent_id: uuid.UUID,
        items: Sequence[NewPassage | tuple[str, list[str]]],
        *,
        exclude: Sequence[uuid.UUID] = (),
        vectors: list[list[float]] | None = None,
    ) -> list[Stored]:
        """Embed and store passages; a near-duplicate of a current (or earlier in the batch) passage is not stored
        again, and its original is returned instead (never one of `exclude`). `vectors`: the contents' embeddings,
        when the caller computed them before its transaction (an import job)."""
        news = [NewPassage(*item) for item in items]
        if vectors is None:
            vectors = await self.embedder.embed_passages([new.content for new in news])
        neighbours = await self.passages.nearest(
            agent_id, vectors, k=3, min_similarity=NEAR_DUPLICATE_CANDIDATE_SIMILARITY, exclude=exclude
        )
        stored: list[Stored] = []
        fresh: list[ArchivalPassage] = []
        for new, vector, near in zip(news, vectors, neighbours, strict=True):
            candidate = ArchivalPassage(
                agent_id=agent_id,
                content=new.content,
                tags=normalise_tags(new.tags),
                embedding=vector,
                embedding_model=self.embedder.model,
                search_text=lexical.search_text(new.content),
            )
            if new.occurred_at is not None:  # else the time it is stored (occurred_field)
                candidate.occurred_at = new.occurred_at
            original = next((p for p in near if same_fact(p, candidate, new.occurred_at)), None) or next(
                (p for p in fresh if same_fact(p, candidate, new.occurred_at)), None
            )
            if original is None:
                fresh.append(candidate)
            stored.append(Stored(original or candidate, duplicate=original is not None))
        await self.passages.add_all(fresh)
        return stored

    async def search(
        self,
        agent_id: uuid.UUID,
        query: str,
        *,
        k: int = 5,
        tags: list[str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        min_score: float = 0.0,
        mode: Mode = "hybrid",
        vector: list[float] | None = None,
        validity: Validity = CURRENT,
        asker: named_speakers.Asker = "user",
    ) -> list[PassageMatch]:
        """`vector`: the query's embedding, when the caller has it already; `validity`: which passages (by default
        the current ones); `asker`: who wrote the query (named_speakers.speakers)."""
        embedding = vector if vector is not None else await self.embedder.embed_query(query)
        matches = await self.passages.hybrid_search(
            agent_id,
            embedding=embedding,
            **_what_the_query_names(query, asker),
            k=k,
            tags=normalise_tags(tags or []),
            after=after,
            before=before,
            mode=mode,
            validity=validity,
        )
        return [m for m in matches if m.score >= min_score]

    async def page(
        self,
        agent_id: uuid.UUID,
        *,
        limit: int,
        cursor: str | None,
        tags: list[str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        validity: Validity = CURRENT,
    ) -> tuple[Sequence[ArchivalPassage], str | None]:
        """A page of passages, newest first, and the cursor of the next page (None on the last)."""
        rows = await self.passages.newest(
            agent_id,
            limit=limit + 1,
            after_key=decode_time_cursor(cursor) if cursor else None,
            tags=normalise_tags(tags or []),
            after=after,
            before=before,
            validity=validity,
        )
        return split_page(rows, limit, lambda p: (p.created_at, p.id))

    async def get(self, agent_id: uuid.UUID, passage_id: uuid.UUID) -> ArchivalPassage:
        passage = await self.passages.get(agent_id, passage_id)
        if passage is None:
            raise NotFound(f"no archival passage {passage_id}")
        return passage

    async def delete(self, agent_id: uuid.UUID, passage_id: uuid.UUID) -> None:
        """Delete a passage; the passages it superseded are current again."""
        if not await self.passages.delete(agent_id, passage_id):
            raise NotFound(f"no archival passage {passage_id}")


class RecallMemory:
    """Every message ever exchanged with the agent, searchable by meaning and by words (user and assistant
    messages), including those that have left the LLM context."""

    def __init__(self, session: AsyncSession, embedder: Embedder):
        self.messages = MessageRepository(session)
        self.embedder = embedder

    async def search(
        self,
        agent_id: uuid.UUID,
        query: str,
        *,
        k: int,
        below_seq: int | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        vector: list[float] | None = None,
        asker: named_speakers.Asker = "user",
        as_of: datetime | None = None,
    ) -> list[tuple[Message, Hit]]:
        """`below_seq`: only messages before it (the start of the context); `vector`: the query's embedding, when
        the caller has it already; `asker`: who wrote the query (named_speakers.speakers); `as_of`: only messages
        said by then."""
        embedding = vector if vector is not None else await self.embedder.embed_query(query)
        return await self.messages.search(
            agent_id,
            embedding=embedding,
            **_what_the_query_names(query, asker),
            k=k,
            below_seq=below_seq,
            after=after,
            before=before,
            said_by=as_of,
        )

    async def page(
        self,
        agent_id: uuid.UUID,
        *,
        limit: int,
        cursor: str | None,
        after: datetime | None = None,
        before: datetime | None = None,
    ) -> tuple[Sequence[Message], str | None]:
        """A page of messages, newest first, and the cursor of the next page (None on the last)."""
        before_seq = decode_seq_cursor(cursor)[0] if cursor else None
        rows = await self.messages.newest(agent_id, limit=limit + 1, before_seq=before_seq, after=after, before=before)
        return split_page(rows, limit, lambda m: (m.seq or 0, m.id))


class MessageLog:
    """Recall memory as turns write and read it: messages appended in order, those since the context start read
    back for the prompt, vectors filled in after the fact (app/chat/message_vectors.py). Searching is RecallMemory's."""

    def __init__(self, session: AsyncSession):
        self.messages = MessageRepository(session)

    async def add(self, message: Message) -> Message:
        return await self.messages.add(message)

    async def since(self, agent_id: uuid.UUID, from_seq: int) -> list[Message]:
        return await self.messages.since(agent_id, from_seq)

    async def count_before(self, agent_id: uuid.UUID, seq: int) -> int:
        return await self.messages.count(agent_id, before_seq=seq)

    async def said_after(self, agent_id: uuid.UUID, after_seq: int, *, limit: int) -> Sequence[Message]:
        """What the user and the agent said after after_seq, handed-in conversations included, oldest first."""
        return await self.messages.said_after(agent_id, after_seq, limit=limit)

    async def count_user_turns_after(self, agent_id: uuid.UUID, after_seq: int) -> int:
        return await self.messages.count_user_turns_after(agent_id, after_seq)

    async def unembedded(self, *, limit: int, settled_before: datetime, exclude: Collection[uuid.UUID] = ()) -> Sequence[Message]:
        return await self.messages.unembedded(limit=limit, settled_before=settled_before, exclude=exclude)

    async def set_embedding(self, message_id: uuid.UUID, embedding: list[float], model: str) -> None:
        await self.messages.set_embedding(message_id, embedding, model)


def normalise_tags(tags: list[str]) -> list[str]:
    cleaned = [t.strip().lower() for t in tags if t and t.strip()]
    if any(len(t) > 64 for t in cleaned):
        raise Unprocessable("tags are at most 64 characters each")
    return list(dict.fromkeys(cleaned))
