"""Recall memory: every message ever exchanged, in order, searchable; only a recent window stays in the context."""

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from app.llm.embeddings import Embedder
from app.memory.models import Message
from app.memory.recall.repository import MessageRepository
from app.memory.search.hybrid import Hit
from app.memory.search.query import SearchQuery
from app.pagination import decode_seq_cursor, split_page


class RecallMemory:
    """Every message ever exchanged with the agent, searchable by meaning and by words (user and assistant
    messages), including those that have left the LLM context; appended in order by turns, read back for the prompt,
    their vectors filled in after the fact (app/memory/recall/vectors.py)."""

    def __init__(self, session: AsyncSession, embedder: Embedder | None = None):
        """`embedder`: for searching by a query's text (not needed to append or read messages, nor to search with
        a vector at hand)."""
        self.messages = MessageRepository(session)
        self.embedder = embedder

    async def search(
        self,
        agent_id: uuid.UUID,
        query: SearchQuery,
        *,
        below_seq: int | None = None,
        vector: list[float] | None = None,
        as_of: datetime | None = None,
    ) -> list[tuple[Message, Hit]]:
        """`below_seq`: only messages before it (the start of the context); `vector`: the query's embedding, when
        the caller has it already; `as_of`: only messages said by then."""
        embedding = vector
        if embedding is None:
            assert self.embedder is not None, "searching by text needs the embedder"
            embedding = await self.embedder.embed_query(query.text)
        return await self.messages.search(agent_id, query, embedding, below_seq=below_seq, said_by=as_of)

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

    async def add(self, message: Message) -> Message:
        return await self.messages.add(message)

    async def add_all(self, messages: Sequence[Message]) -> None:
        """Stored in the order given (their seqs follow it)."""
        await self.messages.add_all(messages)

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

    async def erase_quotes(self, agent_id: uuid.UUID, after_seq: int, quote: str, erased: str) -> None:
        """Tool results after `after_seq` that quote `quote` (a search's answer) have it replaced by `erased`."""
        await self.messages.erase_quotes(agent_id, after_seq, quote, erased)

    async def set_embedding(self, agent_id: uuid.UUID, message_id: uuid.UUID, embedding: list[float], model: str) -> None:
        await self.messages.set_embedding(agent_id, message_id, embedding, model)
