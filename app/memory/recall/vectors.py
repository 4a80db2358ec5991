"""Message vectors for recall search, computed after the message's transaction, off the turn's critical path.

A turn stores its messages without vectors and hands them here; until a vector is stored, recall search finds the
message by its words. A vector lost on the way (the process stopped, the embedder or the database failed) leaves the
row's `embedding_model` NULL, and the periodic sweep (`fill_missing`) computes it again — except for a message the
embedding endpoint refuses (too long for it, say): this process stops asking for it, and it stays findable by its
words, where one such message among the oldest would otherwise fail every sweep's batch, and every message after it
would never get its vector."""

import logging
import uuid
from datetime import timedelta

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import transaction
from app.detached import DetachedTasks
from app.llm.embeddings import Embedder, EmbeddingRefused
from app.memory.recall.service import RecallMemory
from app.models_base import utcnow

log = logging.getLogger("engram.chat.vectors")
# A message younger than this may still have its vector in flight: the sweep leaves it alone.
SETTLED_AFTER = timedelta(minutes=1)
FILL_BATCH = 32


class MessageVectors:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], embedder: Embedder):
        self.sessions = sessions
        self.embedder = embedder
        self._tasks: DetachedTasks[None] = DetachedTasks()
        self._refused: set[uuid.UUID] = set()  # messages the endpoint refused: the sweep passes over them

    def later(self, agent_id: uuid.UUID, message_id: uuid.UUID, text: str, *, vector: list[float] | None = None) -> None:
        """Compute and store the message's vector in the background (the LLM's next call overlaps it); `vector`:
        computed already (a symmetric embedder's query vector of the user's message), only stored."""
        self._tasks.spawn(self._store(agent_id, message_id, text, vector), name=f"embed-message-{message_id}")

    async def _store(self, agent_id: uuid.UUID, message_id: uuid.UUID, text: str, vector: list[float] | None) -> None:
        try:
            if vector is None:
                [vector] = await self.embedder.embed_passages([text])
            await self._save([(agent_id, message_id, vector)])
        except EmbeddingRefused:
            self._set_aside(message_id)
        except Exception:  # the embedder or the database failed, the agent was deleted meanwhile
            log.warning("could not store the vector of message %s; the sweep tries again", message_id, exc_info=True)

    async def fill_missing(self, batch: int = FILL_BATCH) -> int:
        """Vectors of settled messages that have none, a batch at a time; how many were filled. A batch the
        endpoint refuses is asked for again one message at a time, and the messages it refuses alone are set aside."""
        async with self.sessions() as session:
            missing = await RecallMemory(session).unembedded(
                limit=batch, settled_before=utcnow() - SETTLED_AFTER, exclude=self._refused
            )
        if not missing:
            return 0
        try:
            vectors = await self.embedder.embed_passages([m.recall_text() for m in missing])
            found = [(m.agent_id, m.id, v) for m, v in zip(missing, vectors, strict=True)]
        except EmbeddingRefused:
            found = []
            for message in missing:
                try:
                    found += [
                        (message.agent_id, message.id, v) for v in await self.embedder.embed_passages([message.recall_text()])
                    ]
                except EmbeddingRefused:
                    self._set_aside(message.id)
        await self._save(found)
        log.info("stored %d message vector(s) that were missing", len(found))
        return len(found)

    def _set_aside(self, message_id: uuid.UUID) -> None:
        self._refused.add(message_id)
        log.warning("the embedding endpoint refused message %s: it is found by its words alone", message_id)

    async def _save(self, vectors: list[tuple[uuid.UUID, uuid.UUID, list[float]]]) -> None:
        """(agent, message, vector) each: the agent first, as the table is partitioned by it."""
        async with transaction(self.sessions) as session:
            messages = RecallMemory(session)
            for agent_id, message_id, vector in vectors:
                await messages.set_embedding(agent_id, message_id, vector, self.embedder.model)

    def abandon(self) -> None:
        """At shut-down: cancel the vectors in flight rather than wait for them (the sweep of the next start, or of
        another replica, fills them in); the queued embedder work is dropped with them."""
        self._tasks.cancel_all()
