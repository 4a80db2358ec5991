"""SQL for core memory blocks, archival passages and recall messages, including the hybrid (vector + full-text)
search."""

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Select, and_, delete, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import defer
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.memory.hybrid import Hit, Mode, hybrid_search
from app.memory.models import ArchivalPassage, MemoryBlock, MemoryBlockRevision, Message
from app.memory.named_speakers import SPEAKER_LABEL_SQL
from app.models_base import orm_attribute

# Rows are read without their vectors: nothing outside SQL uses them, and turning 384 floats per row into Python
# objects is most of the cost of loading a context's messages. Reading one by accident raises.
NO_PASSAGE_VECTOR = defer(orm_attribute(ArchivalPassage.embedding), raiseload=True)
NO_MESSAGE_VECTOR = defer(orm_attribute(Message.embedding), raiseload=True)


class BlockRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def of_agents(self, agent_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[MemoryBlock]]:
        """The blocks of several agents in one query, by agent, each list ordered by label."""
        query = select(MemoryBlock).where(col(MemoryBlock.agent_id).in_(agent_ids)).order_by(col(MemoryBlock.label))
        by_agent: dict[uuid.UUID, list[MemoryBlock]] = {agent_id: [] for agent_id in agent_ids}
        for block in (await self.session.scalars(query)).all():
            by_agent[block.agent_id].append(block)
        return by_agent

    async def of_agent(self, agent_id: uuid.UUID) -> Sequence[MemoryBlock]:
        query = select(MemoryBlock).where(col(MemoryBlock.agent_id) == agent_id).order_by(col(MemoryBlock.label))
        return (await self.session.scalars(query)).all()

    async def get(self, agent_id: uuid.UUID, label: str, *, for_update: bool = False) -> MemoryBlock | None:
        query = select(MemoryBlock).where(col(MemoryBlock.agent_id) == agent_id, col(MemoryBlock.label) == label)
        if for_update:
            # populate_existing: a row read earlier in this session must not hide a newer committed version.
            query = query.with_for_update().execution_options(populate_existing=True)
        return (await self.session.scalars(query)).first()

    async def add(self, block: MemoryBlock) -> MemoryBlock:
        self.session.add(block)
        await self.session.flush()
        return block

    async def add_revision(self, revision: MemoryBlockRevision) -> None:
        self.session.add(revision)
        await self.session.flush()

    async def as_of(self, agent_id: uuid.UUID, moment: datetime) -> list[tuple[MemoryBlock, MemoryBlockRevision]]:
        """Each of the agent's blocks that had a revision by `moment`, with the newest such revision, by label."""
        query = (
            select(MemoryBlock, MemoryBlockRevision)
            .join(MemoryBlockRevision, col(MemoryBlockRevision.block_id) == col(MemoryBlock.id))
            .where(col(MemoryBlock.agent_id) == agent_id, col(MemoryBlockRevision.created_at) <= moment)
            .order_by(col(MemoryBlock.label), col(MemoryBlockRevision.version).desc())
            .ext(distinct_on(col(MemoryBlock.label)))
        )
        return [(block, revision) for block, revision in (await self.session.execute(query)).all()]

    async def history(self, block_id: uuid.UUID) -> Sequence[MemoryBlockRevision]:
        query = (
            select(MemoryBlockRevision)
            .where(col(MemoryBlockRevision.block_id) == block_id)
            .order_by(col(MemoryBlockRevision.version).desc())
        )
        return (await self.session.scalars(query)).all()


@dataclass
class PassageMatch:
    passage: ArchivalPassage
    score: float
    similarity: float


@dataclass(frozen=True)
class Validity:
    """Which passages a read sees: the current ones (not superseded; a fact dated in the future is current), those
    valid at `as_of` (it had happened by then, and had not been superseded yet), or every one."""

    as_of: datetime | None = None
    include_superseded: bool = False

    def sql(self) -> tuple[list[str], dict[str, Any]]:
        """The conditions as SQL over the table's columns, and their parameters."""
        if self.as_of is not None:
            return ["occurred_at <= :as_of", "(valid_until IS NULL OR valid_until > :as_of)"], {"as_of": self.as_of}
        return ([] if self.include_superseded else ["superseded_by IS NULL"]), {}

    def applied(self, query: Select[Any]) -> Select[Any]:
        if self.as_of is not None:
            valid_until = col(ArchivalPassage.valid_until)
            return query.where(
                col(ArchivalPassage.occurred_at) <= self.as_of, or_(valid_until.is_(None), valid_until > self.as_of)
            )
        return query if self.include_superseded else query.where(col(ArchivalPassage.superseded_by).is_(None))


CURRENT = Validity()


class PassageRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add_all(self, passages: list[ArchivalPassage]) -> list[ArchivalPassage]:
        self.session.add_all(passages)
        await self.session.flush()
        return passages

    async def nearest(
        self,
        agent_id: uuid.UUID,
        vectors: list[list[float]],
        *,
        k: int,
        min_similarity: float,
        exclude: Sequence[uuid.UUID] = (),
    ) -> list[list[ArchivalPassage]]:
        """For each vector, the agent's current passages within min_similarity, closest first (one statement)."""
        if not vectors:
            return []
        rows = (
            await self.session.execute(
                text("""
            SELECT q.i, p.id FROM unnest(CAST(:vectors AS vector[])) WITH ORDINALITY AS q(v, i)
            CROSS JOIN LATERAL (
                SELECT id, embedding <=> q.v AS distance FROM archival_passages
                WHERE agent_id = :agent_id AND superseded_by IS NULL AND id <> ALL(CAST(:exclude AS uuid[]))
                ORDER BY embedding <=> q.v LIMIT :k
            ) p
            WHERE p.distance <= :max_distance
            ORDER BY q.i, p.distance
        """),
                {
                    "vectors": [str(v) for v in vectors],
                    "agent_id": agent_id,
                    "k": k,
                    "max_distance": 1 - min_similarity,
                    "exclude": list(exclude),
                },
            )
        ).all()
        if not rows:
            return [[] for _ in vectors]
        found = (
            await self.session.scalars(
                select(ArchivalPassage).options(NO_PASSAGE_VECTOR).where(col(ArchivalPassage.id).in_({r.id for r in rows}))
            )
        ).all()
        by_id = {p.id: p for p in found}
        out: list[list[ArchivalPassage]] = [[] for _ in vectors]
        for row in rows:
            out[row.i - 1].append(by_id[row.id])
        return out

    async def closest(
        self, agent_id: uuid.UUID, vector: list[float], *, k: int, exclude: Sequence[uuid.UUID] = ()
    ) -> list[tuple[ArchivalPassage, float]]:
        """The agent's `k` current passages closest to `vector`, with their cosine similarity, closest first."""
        distance = col(ArchivalPassage.embedding).op("<=>", return_type=Float)(vector)  # cosine distance (pgvector)
        query = (
            select(ArchivalPassage, 1 - distance)
            .options(NO_PASSAGE_VECTOR)
            .where(col(ArchivalPassage.agent_id) == agent_id, col(ArchivalPassage.superseded_by).is_(None))
            .where(col(ArchivalPassage.id).not_in(exclude))
            .order_by(distance)
            .limit(k)
        )
        return [(passage, float(similarity)) for passage, similarity in (await self.session.execute(query)).all()]

    async def get(self, agent_id: uuid.UUID, passage_id: uuid.UUID, *, for_update: bool = False) -> ArchivalPassage | None:
        query = (
            select(ArchivalPassage)
            .options(NO_PASSAGE_VECTOR)
            .where(col(ArchivalPassage.agent_id) == agent_id, col(ArchivalPassage.id) == passage_id)
        )
        if for_update:
            # populate_existing: a row read earlier in this session must not hide a newer committed state.
            query = query.with_for_update().execution_options(populate_existing=True)
        return (await self.session.scalars(query)).first()

    async def delete(self, agent_id: uuid.UUID, passage_id: uuid.UUID) -> bool:
        """Delete a passage; the passages it superseded are current again."""
        await self.session.execute(
            update(ArchivalPassage)
            .where(col(ArchivalPassage.agent_id) == agent_id, col(ArchivalPassage.superseded_by) == passage_id)
            .values(valid_until=None, superseded_by=None)
        )
        result = await self.session.exec(
            delete(ArchivalPassage).where(col(ArchivalPassage.agent_id) == agent_id, col(ArchivalPassage.id) == passage_id)
        )
        return bool(result.rowcount)

    async def newest(
        self,
        agent_id: uuid.UUID,
        *,
        limit: int,
        after_key: tuple[datetime, uuid.UUID] | None = None,
        tags: list[str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        validity: Validity = CURRENT,
    ) -> Sequence[ArchivalPassage]:
        """Newest first; after_key is the (created_at, id) of the last row of the previous page."""
        query = select(ArchivalPassage).options(NO_PASSAGE_VECTOR).where(col(ArchivalPassage.agent_id) == agent_id)
        query = validity.applied(query)
        if tags:
            query = query.where(col(ArchivalPassage.tags).contains(tags))
        if after:
            query = query.where(col(ArchivalPassage.created_at) > after)
        if before:
            query = query.where(col(ArchivalPassage.created_at) < before)
        if after_key:
            created, row_id = after_key
            query = query.where(
                or_(
                    col(ArchivalPassage.created_at) < created,
                    and_(col(ArchivalPassage.created_at) == created, col(ArchivalPassage.id) < row_id),
                )
            )
        query = query.order_by(col(ArchivalPassage.created_at).desc(), col(ArchivalPassage.id).desc()).limit(limit)
        return (await self.session.scalars(query)).all()

    async def hybrid_search(
        self,
        agent_id: uuid.UUID,
        *,
        embedding: list[float],
        terms: list[str],
        dates: list[tuple[datetime, datetime]] | None = None,
        speakers: list[str] | None = None,
        k: int,
        tags: list[str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        mode: Mode = "hybrid",
        validity: Validity = CURRENT,
    ) -> list[PassageMatch]:
        valid, valid_params = validity.sql()
        found = await hybrid_search(
            self.session,
            ArchivalPassage,
            agent_id,
            embedding=embedding,
            terms=terms,
            dates=dates,
            speakers=speakers,
            k=k,
            mode=mode,
            where=[*valid, *(["tags @> CAST(:tags AS text[])"] if tags else [])],
            params={"tags": tags, **valid_params},
            after=after,
            before=before,
            sequence=("created_at", "id"),
            speaker=SPEAKER_LABEL_SQL,
        )
        return [PassageMatch(passage, hit.score, hit.similarity) for passage, hit in found]


class MessageRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add(self, message: Message) -> Message:
        self.session.add(message)
        await self.session.flush()
        return message

    async def add_all(self, messages: list[Message]) -> None:
        """Stored in the order given (their seqs follow it)."""
        self.session.add_all(messages)
        await self.session.flush()

    async def set_embedding(self, message_id: uuid.UUID, embedding: list[float], model: str) -> None:
        """Store a message's vector, unless `engram reembed` has given it one of another model meanwhile."""
        query = (
            update(Message)
            .where(col(Message.id) == message_id, col(Message.embedding_model).is_(None))
            .values(embedding=embedding, embedding_model=model)
        )
        await self.session.execute(query)

    async def unembedded(self, *, limit: int, settled_before: datetime, exclude: Collection[uuid.UUID] = ()) -> Sequence[Message]:
        """Searchable messages without a vector (lost on the way), oldest first, of any agent, but `exclude`."""
        query = (
            select(Message)
            .options(NO_MESSAGE_VECTOR)
            .where(
                col(Message.embedding_model).is_(None),
                col(Message.role).in_(("user", "assistant")),
                col(Message.search_text) != "",
                col(Message.created_at) < settled_before,
                col(Message.id).not_in(exclude),
            )
            .order_by(col(Message.created_at))
            .limit(limit)
        )
        return (await self.session.scalars(query)).all()

    async def since(self, agent_id: uuid.UUID, from_seq: int) -> list[Message]:
        """The agent's own messages (not handed in) with seq >= from_seq, oldest first."""
        query = (
            select(Message)
            .options(NO_MESSAGE_VECTOR)
            .where(col(Message.agent_id) == agent_id, col(Message.seq) >= from_seq, ~col(Message.handed_in))
        )
        return list((await self.session.scalars(query.order_by(col(Message.seq)))).all())

    async def said_after(self, agent_id: uuid.UUID, after_seq: int, *, limit: int) -> Sequence[Message]:
        """User and assistant messages, its own and handed in, with seq > after_seq, oldest first."""
        query = (
            select(Message)
            .options(NO_MESSAGE_VECTOR)
            .where(
                col(Message.agent_id) == agent_id,
                col(Message.seq) > after_seq,
                col(Message.role).in_(("user", "assistant")),
            )
            .order_by(col(Message.seq))
            .limit(limit)
        )
        return (await self.session.scalars(query)).all()

    async def count_user_turns_after(self, agent_id: uuid.UUID, after_seq: int) -> int:
        """The user's messages in the agent's own turns (not handed in) with seq > after_seq."""
        query = (
            select(func.count())
            .select_from(Message)
            .where(
                col(Message.agent_id) == agent_id,
                col(Message.seq) > after_seq,
                col(Message.role) == "user",
                ~col(Message.handed_in),
            )
        )
        return int((await self.session.scalar(query)) or 0)

    async def with_external_ids(self, agent_id: uuid.UUID, external_ids: Sequence[str]) -> dict[str, Message]:
        query = (
            select(Message)
            .options(NO_MESSAGE_VECTOR)
            .where(col(Message.agent_id) == agent_id, col(Message.external_id).in_(external_ids))
        )
        return {m.external_id or "": m for m in (await self.session.scalars(query)).all()}

    async def newest(
        self,
        agent_id: uuid.UUID,
        *,
        limit: int,
        before_seq: int | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
    ) -> Sequence[Message]:
        """Newest first; before_seq is the seq of the last message of the previous page."""
        query = select(Message).options(NO_MESSAGE_VECTOR).where(col(Message.agent_id) == agent_id)
        if before_seq is not None:
            query = query.where(col(Message.seq) < before_seq)
        if after:
            query = query.where(col(Message.created_at) > after)
        if before:
            query = query.where(col(Message.created_at) < before)
        return (await self.session.scalars(query.order_by(col(Message.seq).desc()).limit(limit))).all()

    async def search(
        self,
        agent_id: uuid.UUID,
        *,
        embedding: list[float],
        terms: list[str],
        dates: list[tuple[datetime, datetime]] | None = None,
        speakers: list[str] | None = None,
        k: int,
        below_seq: int | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        said_by: datetime | None = None,
    ) -> list[tuple[Message, Hit]]:
        """`said_by`: only messages that had been said by then (occurred_at), as memory stood at that time."""
        # Handed-in messages are never in the context, so they are searched wherever they are.
        below = ["(seq < :below_seq OR handed_in)"] if below_seq is not None else []
        if said_by is not None:
            below.append("occurred_at <= :said_by")
        return await hybrid_search(
            self.session,
            Message,
            agent_id,
            embedding=embedding,
            terms=terms,
            dates=dates,
            speakers=speakers,
            k=k,
            where=["role IN ('user', 'assistant')", *below],
            params={"below_seq": below_seq, "said_by": said_by},
            after=after,
            before=before,
            sequence=("seq",),
            speaker="t.role",
        )

    async def count(self, agent_id: uuid.UUID, *, before_seq: int) -> int:
        query = select(func.count()).select_from(Message).where(col(Message.agent_id) == agent_id, col(Message.seq) < before_seq)
        return int((await self.session.scalar(query)) or 0)
