"""The embedding space of a database: which model made its vectors, recorded in the one-row `embedding_space`
table (each vector row also stores its model). Vectors of different models are not comparable, so the service
refuses to start with another model than the stored one, and `engram reembed` is the way from one to the other."""

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.llm.embeddings.base import Embedder


class EmbeddingSpaceMismatch(RuntimeError):
    """The configured embedder is not the one the database's vectors were made with."""


_STORED_DIM = text(
    "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('archival_passages') AND attname = 'embedding'"
)


async def stored_dim(conn: AsyncConnection) -> int | None:
    typmod = (await conn.execute(_STORED_DIM)).scalar()
    return int(typmod) if typmod is not None else None


async def stored_space(conn: AsyncConnection) -> tuple[str, bool] | None:
    """(model, complete) of the database, or None while no vector was ever stored."""
    row = (await conn.execute(text("SELECT model, complete FROM embedding_space WHERE id = 1"))).first()
    return (row.model, row.complete) if row else None


async def record_space(conn: AsyncConnection, model: str, *, complete: bool) -> None:
    await conn.execute(
        text(
            "INSERT INTO embedding_space (id, model, complete) VALUES (1, :model, :complete) "
            "ON CONFLICT (id) DO UPDATE SET model = excluded.model, complete = excluded.complete, updated_at = now()"
        ),
        {"model": model, "complete": complete},
    )


async def check_embedding_space(engine: AsyncEngine, embedder: Embedder) -> None:
    """Claims an empty database for the embedder; refuses a database whose vectors come from another model."""
    reembed_hint = (
        "run `engram reembed` with the same settings to move every passage and message to it (resumable; nothing "
        "is lost if it stops), or configure the stored model again (ENGRAM_EMBEDDING_PROVIDER / ENGRAM_EMBEDDING_MODEL)"
    )
    async with engine.begin() as conn:
        dim = await stored_dim(conn)
        if dim is None:
            raise EmbeddingSpaceMismatch(
                "the database has no Engram schema: run `engram migrate` (or start with ENGRAM_MIGRATE_ON_START=true)"
            )
        await conn.execute(
            text("INSERT INTO embedding_space (id, model, complete) VALUES (1, :model, true) ON CONFLICT (id) DO NOTHING"),
            {"model": embedder.model},
        )
        model, complete = await stored_space(conn) or (embedder.model, True)
    if not complete:
        raise EmbeddingSpaceMismatch(
            f"`engram reembed` to {model} did not finish, so the database holds vectors of two models: "
            "run `engram reembed` again to complete it (it resumes where it stopped)"
        )
    if model != embedder.model or dim != embedder.dim:
        raise EmbeddingSpaceMismatch(
            f"the database's embeddings were made by {model} ({dim} dims), but the configured embedder is "
            f"{embedder.model} ({embedder.dim} dims); comparing the two would make memory search meaningless: {reembed_hint}"
        )
