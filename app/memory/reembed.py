"""`engram reembed`: move every stored vector to the configured embedder (another model, or another dimension).

Resumable, in bounded memory: each batch of rows is embedded and committed on its own, and a row's
`embedding_model` tells whether it is done, so a run that stops (Ctrl-C, a crash, a lost connection) loses at most
one batch of work and the next run carries on. Text is never touched; only derived vectors are replaced. While a
run is unfinished, `embedding_space.complete` is false and the service refuses to start (the database holds
vectors of two models). The agents' own vector indexes are dropped at the start and built again by the service
once it starts (cheaper than updating them row by row); a different dimension retypes the vector columns first."""

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.llm.embeddings import Embedder
from app.llm.embeddings.space import record_space, stored_dim, stored_space
from app.memory.kinds import SEARCHABLE, TABLES, Kind, SearchableKind
from app.memory.search.agent_indexes import drop_own_indexes

log = logging.getLogger("engram.reembed")
BATCH = 64
REEMBED_LOCK_KEY = 0x72656D62  # "remb": one run at a time


class Progress(Protocol):
    def total(self, rows: int) -> None: ...

    def advance(self, rows: int) -> None: ...


class _Silent:
    def total(self, rows: int) -> None:
        pass

    def advance(self, rows: int) -> None:
        log.info("re-embedded %d more rows", rows)


class ReembedBusy(RuntimeError):
    """Another `engram reembed` holds the database."""


@dataclass
class ReembedResult:
    rows: dict[Kind, int]  # embedded by this run, per kind

    def __str__(self) -> str:
        """As `engram reembed` reports it: "3 passages and 2 messages"."""
        return " and ".join(f"{self.rows[kind.name]} {kind.noun}" for kind in SEARCHABLE)


def pending(kind: SearchableKind[Any]) -> str:
    """SQL over the kind's table: its rows still to embed with `:model`."""
    stale = "embedding_model IS DISTINCT FROM :model"
    return f"{stale} AND {kind.embedded}" if kind.embedded else stale


async def reembed(
    engine: AsyncEngine, embedder: Embedder, *, batch: int = BATCH, progress: Progress | None = None
) -> ReembedResult:
    """Rows embedded by this run, per table (rows a stopped earlier run finished are not counted again)."""
    progress = progress or _Silent()
    async with engine.connect() as lock_conn:
        if not (await lock_conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": REEMBED_LOCK_KEY})).scalar():
            raise ReembedBusy("another `engram reembed` is running on this database")
        try:
            if await _up_to_date(engine, embedder):
                return ReembedResult({kind.name: 0 for kind in SEARCHABLE})
            await _prepare(engine, embedder)
            done: dict[Kind, int] = {kind.name: 0 for kind in SEARCHABLE}
            # Again until none is left: rows written meanwhile by a service still running on the old model.
            while pending := await _pending(engine, embedder.model):
                progress.total(sum(done.values()) + pending)
                for kind in SEARCHABLE:
                    done[kind.name] += await _embed_table(engine, embedder, kind, batch, progress)
            await _finish(engine, embedder)
            return ReembedResult(done)
        finally:
            await lock_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": REEMBED_LOCK_KEY})


async def _up_to_date(engine: AsyncEngine, embedder: Embedder) -> bool:
    async with engine.connect() as conn:
        space, dim = await stored_space(conn), await stored_dim(conn)
    return space == (embedder.model, True) and dim == embedder.dim and not await _pending(engine, embedder.model)


async def _prepare(engine: AsyncEngine, embedder: Embedder) -> None:
    async with engine.begin() as conn:
        await drop_own_indexes(conn, TABLES)  # once a build in progress on a running service is over
        for kind in SEARCHABLE:
            if kind.vector_required:
                await conn.execute(text(f"ALTER TABLE {kind.table} ALTER COLUMN embedding DROP NOT NULL"))
        if await stored_dim(conn) != embedder.dim:
            # Old vectors cannot be kept in a column of the new size; their rows stay pending until embedded.
            for table in TABLES:
                await conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({embedder.dim}) USING NULL"))
                # A new type brings the type's default storage back; vectors stay in the row (migration 0005).
                await conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN"))
        await record_space(conn, embedder.model, complete=False)
    log.info("re-embedding with %s (%d dims)", embedder.model, embedder.dim)


async def _pending(engine: AsyncEngine, model: str) -> int:
    async with engine.connect() as conn:
        counts = [
            (await conn.execute(text(f"SELECT count(*) FROM {kind.table} WHERE {pending(kind)}"), {"model": model})).scalar_one()
            for kind in SEARCHABLE
        ]
    return sum(counts)


async def _embed_table(engine: AsyncEngine, embedder: Embedder, kind: SearchableKind[Any], batch: int, progress: Progress) -> int:
    """Embeds the kind's pending rows in key order (agent, id: the primary key), one committed transaction per batch."""
    columns = ", ".join(kind.text_columns)
    after, done = (uuid.UUID(int=0), uuid.UUID(int=0)), 0
    while True:
        async with engine.begin() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"SELECT agent_id, id, {columns} FROM {kind.table} WHERE {pending(kind)} "
                        "AND (agent_id, id) > (:after_agent, :after_id) ORDER BY agent_id, id LIMIT :n"
                    ),
                    {"model": embedder.model, "after_agent": after[0], "after_id": after[1], "n": batch},
                )
            ).all()
            if not rows:
                return done
            vectors = await embedder.embed_passages(
                [kind.text_of({c: row._mapping[c] for c in kind.text_columns}) for row in rows]
            )
            await _store(conn, kind.table, [(row.agent_id, row.id) for row in rows], vectors, embedder.model)
        after, done = (rows[-1].agent_id, rows[-1].id), done + len(rows)
        progress.advance(len(rows))


async def _store(
    conn: AsyncConnection, table: str, keys: list[tuple[uuid.UUID, uuid.UUID]], vectors: list[list[float]], model: str
) -> None:
    await conn.execute(
        text(
            f"UPDATE {table} AS t SET embedding = CAST(v.vector AS vector), embedding_model = :model "
            "FROM unnest(CAST(:agents AS uuid[]), CAST(:ids AS uuid[]), CAST(:vectors AS text[])) AS v(agent_id, id, vector) "
            "WHERE t.agent_id = v.agent_id AND t.id = v.id"
        ),
        {"agents": [a for a, _ in keys], "ids": [i for _, i in keys], "vectors": [str(v) for v in vectors], "model": model},
    )


async def _finish(engine: AsyncEngine, embedder: Embedder) -> None:
    async with engine.begin() as conn:
        for kind in SEARCHABLE:
            if kind.vector_required:
                await conn.execute(text(f"ALTER TABLE {kind.table} ALTER COLUMN embedding SET NOT NULL"))
        await record_space(conn, embedder.model, complete=True)
    log.info("re-embedding complete")
