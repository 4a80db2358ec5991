"""SQL of recall messages, including their hybrid (vector + full-text) search."""

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.orm import defer
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.memory.models import Message
from app.memory.search import lexical
from app.memory.search.hybrid import Hit, hybrid_search
from app.memory.search.query import SearchQuery
from app.models_base import orm_attribute

# Rows are read without their vectors (see NO_PASSAGE_VECTOR in app/memory/archival/repository.py).
NO_MESSAGE_VECTOR = defer(orm_attribute(Message.embedding), raiseload=True)
SEARCHED_ROLES = ("user", "assistant")


class MessageRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add(self, message: Message) -> Message:
        await self.add_all([message])
        return message

    async def add_all(self, messages: Sequence[Message]) -> None:
        """Stored in the order given (their seqs follow it), each with the text full-text search reads
        (`search_text`): the tokens of what a user's or an assistant's message said and sent (`recall_text`), none of
        a tool's result or a system notice, which search never returns. Made here, not by the callers: every
        message is searched alike, however it was written."""
        for message in messages:
            message.search_text = lexical.search_text(message.recall_text()) if message.role in SEARCHED_ROLES else ""
        self.session.add_all(messages)
        await self.session.flush()

    async def set_embedding(self, agent_id: uuid.UUID, message_id: uuid.UUID, embedding: list[float], model: str) -> None:
        """Store a message's vector, unless `engram reembed` has given it one of another model meanwhile."""
        query = (
            update(Message)
            .where(col(Message.agent_id) == agent_id, col(Message.id) == message_id, col(Message.embedding_model).is_(None))
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
        query: SearchQuery,
        embedding: list[float],
        *,
        below_seq: int | None = None,
        said_by: datetime | None = None,
    ) -> list[tuple[Message, Hit]]:
        """`said_by`: only messages that had been said by then (occurred_at), as memory stood at that time."""
        # Handed-in messages are never in the context, so they are searched wherever they are.
        below = ["(seq < :below_seq OR handed_in)"] if below_seq is not None else []
        if said_by is not None:
            below.append("occurred_at <= :said_by")
        where, params = ["role IN ('user', 'assistant')", *below], {"below_seq": below_seq, "said_by": said_by}
        # An agent with no message to search (one that keeps passages only, as callers of the recollection API
        # often do) is answered at once: the hybrid statement takes ~6 ms to plan and run over no rows.
        exists = f"SELECT EXISTS (SELECT 1 FROM messages WHERE agent_id = :agent_id AND {' AND '.join(where)})"
        if not await self.session.scalar(text(exists), {"agent_id": agent_id} | params):
            return []
        return await hybrid_search(
            self.session, Message, agent_id, query, embedding, where=where, params=params, sequence=("seq",), speaker="t.role"
        )

    async def get(self, agent_id: uuid.UUID, message_id: uuid.UUID) -> Message | None:
        query = select(Message).options(NO_MESSAGE_VECTOR).where(col(Message.agent_id) == agent_id, col(Message.id) == message_id)
        return (await self.session.scalars(query.with_for_update())).first()

    async def results_of(self, agent_id: uuid.UUID, call: Message) -> Sequence[Message]:
        """The tool results answering an assistant message's calls."""
        ids = [c["id"] for c in call.tool_calls or []]
        if not ids or call.turn_id is None:
            return []
        query = (
            select(Message)
            .options(NO_MESSAGE_VECTOR)
            .where(
                col(Message.agent_id) == agent_id,
                col(Message.turn_id) == call.turn_id,
                col(Message.role) == "tool",
                col(Message.tool_call_id).in_(ids),
            )
        )
        return (await self.session.scalars(query.with_for_update())).all()

    async def call_of(self, agent_id: uuid.UUID, result: Message) -> uuid.UUID | None:
        """The assistant message whose call a tool result answers."""
        query = text("""
            SELECT id FROM messages WHERE agent_id = :agent_id AND turn_id = :turn_id AND role = 'assistant'
            AND tool_calls @> jsonb_build_array(jsonb_build_object('id', CAST(:call_id AS text)))
        """)
        params = {"agent_id": agent_id, "turn_id": result.turn_id, "call_id": result.tool_call_id}
        return (await self.session.execute(query, params)).scalar()

    async def delete(self, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> None:
        await self.session.execute(delete(Message).where(col(Message.agent_id) == agent_id, col(Message.id).in_(ids)))

    async def erase_quotes(self, agent_id: uuid.UUID, after_seq: int, quote: str, erased: str) -> None:
        """Tool results after `after_seq` that quote `quote` (a search's answer) have it replaced by `erased`."""
        await self.session.execute(
            text("""
            UPDATE messages SET content = replace(content, :quote, :erased)
            WHERE agent_id = :agent_id AND role = 'tool' AND seq > :after_seq AND strpos(content, :quote) > 0
        """),
            {"agent_id": agent_id, "after_seq": after_seq, "quote": quote, "erased": erased},
        )

    async def count(self, agent_id: uuid.UUID, *, before_seq: int) -> int:
        query = select(func.count()).select_from(Message).where(col(Message.agent_id) == agent_id, col(Message.seq) < before_seq)
        return int((await self.session.scalar(query)) or 0)
