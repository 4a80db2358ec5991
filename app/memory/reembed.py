"""`engram reembed`: move every stored embedding to the configured embedder (another model or dimension).

One transaction: the vector indexes are dropped, the columns retyped to the new dimension, every archival passage
and searchable message embedded again in batches, and the indexes rebuilt. Until it commits, the service keeps
reading the old embeddings; if it fails, nothing changed."""

import logging

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from app.llm.embeddings import Embedder
from app.tables import ArchivalPassage, Message

log = logging.getLogger("engram.reembed")
BATCH = 256
VECTOR_INDEXES = {"archival_passages": "ix_archival_passages_embedding", "messages": "ix_messages_embedding"}


async def reembed(engine: AsyncEngine, embedder: Embedder) -> tuple[int, int]:
    """Returns (passages, messages) embedded again."""
    async with engine.begin() as conn:
        session = AsyncSession(bind=conn)
        for table, index in VECTOR_INDEXES.items():
            await conn.execute(text(f"DROP INDEX IF EXISTS {index}"))
            await conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN embedding DROP NOT NULL"))
            await conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({embedder.dim}) USING NULL"))
        passages = await _embed_all(session, select(ArchivalPassage).order_by(ArchivalPassage.id), lambda p: p.content, embedder)
        searchable = select(Message).where(Message.role.in_(("user", "assistant")), Message.search_text != "").order_by(Message.id)
        messages = await _embed_all(session, searchable, lambda m: m.recall_text(), embedder)
        await session.flush()
        await conn.execute(text("UPDATE archival_passages SET embedding_model = :model"), {"model": embedder.model})
        await conn.execute(text("ALTER TABLE archival_passages ALTER COLUMN embedding SET NOT NULL"))
        for table, index in VECTOR_INDEXES.items():
            await conn.execute(text(f"CREATE INDEX {index} ON {table} USING hnsw (embedding vector_cosine_ops)"))
    return passages, messages


async def _embed_all(session: AsyncSession, query, body, embedder: Embedder) -> int:  # type: ignore[no-untyped-def]
    done = 0
    offset = 0
    while True:
        rows = list((await session.scalars(query.offset(offset).limit(BATCH))).all())
        if not rows:
            return done
        for row, vector in zip(rows, await embedder.embed([body(r) for r in rows]), strict=True):
            row.embedding = vector
        await session.flush()
        done += len(rows)
        offset += BATCH
        log.info("re-embedded %d rows", done)
