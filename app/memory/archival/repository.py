"""SQL of archival passages, including their hybrid (vector + full-text) search."""

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Float, and_, or_, select, text
from sqlalchemy.orm import defer
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.memory.archival.validity import CURRENT, Validity
from app.memory.models import ArchivalPassage
from app.memory.schemas import MAX_SOURCES
from app.memory.search import lexical
from app.memory.search.hybrid import Hit, hybrid_search
from app.memory.search.named_speakers import PASSAGE_SPEAKER_SQL
from app.memory.search.query import SearchQuery
from app.models_base import orm_attribute

# Rows are read without their vectors: nothing outside SQL uses them, and turning 384 floats per row into Python
# objects is most of the cost of reading them. Reading one by accident raises.
NO_PASSAGE_VECTOR = defer(orm_attribute(ArchivalPassage.embedding), raiseload=True)


class PassageRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add_all(self, passages: Sequence[ArchivalPassage]) -> None:
        """New passages, each stored with the text full-text search reads (`search_text`): the tokens of its
        content. Made here, not by the callers: every passage is searched alike, however it was written."""
        for passage in passages:
            passage.search_text = lexical.search_text(passage.content)
        self.session.add_all(passages)
        await self.session.flush()

    async def save(self, passage: ArchivalPassage) -> None:
        """Writes a stored passage's changes (its validity, its key) now, before a statement that must see them."""
        self.session.add(passage)
        await self.session.flush()

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
                select(ArchivalPassage)
                .options(NO_PASSAGE_VECTOR)
                .where(col(ArchivalPassage.agent_id) == agent_id, col(ArchivalPassage.id).in_({r.id for r in rows}))
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

    async def add_sources(self, passage: ArchivalPassage, more: Sequence[uuid.UUID]) -> None:
        """Adds `more` to a derived passage's sources, up to MAX_SOURCES (the first ones kept: a fact drawn from more
        lines than that stands for the lines it was first drawn from), in one statement: an erasure meanwhile that
        trimmed or erased the row is not undone. `passage` shows what the row holds now (nothing, if it is gone)."""
        row = (
            await self.session.execute(
                text("""
            UPDATE archival_passages SET sources = (sources || ARRAY(
                SELECT s FROM unnest(CAST(:more AS uuid[])) WITH ORDINALITY AS m(s, i) WHERE s <> ALL(sources) ORDER BY i
            ))[1:CAST(:most AS int)]
            WHERE agent_id = :agent_id AND id = :id AND sources <> '{}'
            RETURNING sources
        """),
                {"more": list(more), "most": MAX_SOURCES, "agent_id": passage.agent_id, "id": passage.id},
            )
        ).first()
        set_committed_value(passage, "sources", list(row.sources) if row else [])

    async def unknown_sources(self, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
        """Those of `ids` that are neither a message nor a passage of the agent, in the order given (`source_times`)."""
        known = await self.source_times(agent_id, ids)
        return [i for i in dict.fromkeys(ids) if i not in known]

    async def source_times(self, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, datetime]:
        """Of `ids`, the agent's messages and passages, each with when it was said. They stay locked until the
        transaction ends: erasing one meanwhile (app/memory/archival/erasure.py) waits, and then finds what was drawn from it,
        or goes first, and this finds it gone."""
        if not ids:
            return {}
        known: dict[uuid.UUID, datetime] = {}
        for table in ("messages", "archival_passages"):
            query = (
                f"SELECT id, occurred_at FROM {table} WHERE agent_id = :agent_id AND id = ANY(CAST(:ids AS uuid[])) FOR KEY SHARE"
            )
            rows = await self.session.execute(text(query), {"agent_id": agent_id, "ids": list(set(ids))})
            known.update({row.id: row.occurred_at for row in rows})
        return known

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
        query: SearchQuery,
        embedding: list[float],
        *,
        tags: list[str] | None = None,
        validity: Validity = CURRENT,
    ) -> list[tuple[ArchivalPassage, Hit]]:
        valid, valid_params = validity.sql()
        return await hybrid_search(
            self.session,
            ArchivalPassage,
            agent_id,
            query,
            embedding,
            where=[*valid, *(["tags @> CAST(:tags AS text[])"] if tags else [])],
            params={"tags": tags, **valid_params},
            sequence=("created_at", "id"),
            speaker=PASSAGE_SPEAKER_SQL,
        )

    async def lock_keys(self, agent_id: uuid.UUID, keys: Sequence[str]) -> None:
        """Holds the agent's `keys` until the transaction ends: another writer of one of them waits for it. Taken in
        the order of their lock ids (two writers of the same keys never wait on each other crosswise), and always
        before a row lock of a passage they name (PUT …/archival/keys/{key} and supersede agree on the order)."""
        for lock in sorted({key_lock(agent_id, key) for key in keys}):
            await self.session.execute(text("SELECT pg_advisory_xact_lock(:space, :key)"), {"space": KEY_LOCKS, "key": lock})

    async def with_keys(
        self, agent_id: uuid.UUID, keys: Sequence[str], *, for_update: bool = False
    ) -> dict[str, ArchivalPassage]:
        """The agent's current passages that hold one of `keys`, by key."""
        query = (
            select(ArchivalPassage)
            .options(NO_PASSAGE_VECTOR)
            .where(col(ArchivalPassage.agent_id) == agent_id, col(ArchivalPassage.key).in_(keys))
            .where(col(ArchivalPassage.superseded_by).is_(None))
        )
        if for_update:
            query = query.with_for_update().execution_options(populate_existing=True)
        return {p.key: p for p in (await self.session.scalars(query)).all() if p.key is not None}

    # Erasure by provenance (app/memory/archival/erasure.py). Every statement names the agent: the table is partitioned by it,
    # and provenance never crosses agents.

    async def key_versions(self, agent_id: uuid.UUID, key: str) -> list[tuple[uuid.UUID, bool]]:
        """Every passage that holds or held `key` (its current one and its earlier versions), newest first, each
        with whether it is current; locked until the transaction ends."""
        query = text("""
            SELECT id, superseded_by IS NULL AS current FROM archival_passages WHERE agent_id = :agent_id AND key = :key
            ORDER BY created_at DESC, id DESC FOR UPDATE
        """)
        return [(row.id, row.current) for row in await self.session.execute(query, {"agent_id": agent_id, "key": key})]

    async def erased_with(self, agent_id: uuid.UUID, roots: Sequence[uuid.UUID]) -> list[uuid.UUID]:
        """`roots` (messages or passages) and every passage erased with them: one whose sources are all erased joins
        them, and so on down the chain, in one recursive statement over the GIN index on `sources`. Each round looks
        only at the passages drawn from what the last one added (`fresh`) and keeps the whole set in one row, so
        that a passage drawn from two erased things is found when its last one goes, whatever the order. A cycle
        (two passages drawn from each other, possible since a near-duplicate drawn again takes on the new one's
        sources) ends: no id joins twice."""
        query = text("""
            WITH RECURSIVE closure(erased, fresh) AS (
                SELECT CAST(:roots AS uuid[]), CAST(:roots AS uuid[])
              UNION ALL
                SELECT c.erased || d.ids, d.ids FROM closure c
                CROSS JOIN LATERAL (
                    SELECT array_agg(p.id) AS ids FROM archival_passages p
                    WHERE p.agent_id = :agent_id AND p.sources <> '{}' AND p.sources && c.fresh AND p.sources <@ c.erased
                    AND p.id <> ALL(c.erased)
                ) d
                WHERE d.ids IS NOT NULL
            )
            SELECT erased FROM closure ORDER BY cardinality(erased) DESC LIMIT 1
        """)
        return list((await self.session.execute(query, {"agent_id": agent_id, "roots": list(roots)})).scalar_one())

    async def release_keys(self, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> None:
        """The passages `ids` (about to go) hold no key from here on: the key's other versions may be current again."""
        query = text("""
            UPDATE archival_passages SET key = NULL
            WHERE agent_id = :agent_id AND id = ANY(CAST(:ids AS uuid[])) AND key IS NOT NULL
        """)
        await self.session.execute(query, {"agent_id": agent_id, "ids": list(ids)})

    async def restore_superseded(self, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> None:
        """The passages that `ids` (about to go) superseded are current again, unless they go too (the foreign key
        would only clear one half of the pair); each but a keyed one whose key has its heir: the key's current
        passage, or the latest of its versions restored here, which then supersedes it."""
        query = text("""
            WITH orphan AS (
                SELECT id, key, created_at FROM archival_passages
                WHERE agent_id = :agent_id AND superseded_by = ANY(CAST(:ids AS uuid[])) AND id <> ALL(CAST(:ids AS uuid[]))
            ), heir AS (
                SELECT o.id, COALESCE(
                    (SELECT q.id FROM archival_passages q
                     WHERE q.agent_id = :agent_id AND q.key = o.key AND q.superseded_by IS NULL),
                    (SELECT n.id FROM orphan n WHERE n.key = o.key ORDER BY n.created_at DESC, n.id DESC LIMIT 1)
                ) AS id_of FROM orphan o
            )
            UPDATE archival_passages p
            SET superseded_by = NULLIF(h.id_of, p.id),
                valid_until = CASE WHEN h.id_of IS NULL OR h.id_of = p.id THEN NULL ELSE p.valid_until END
            FROM heir h WHERE p.agent_id = :agent_id AND p.id = h.id
        """)
        await self.session.execute(query, {"agent_id": agent_id, "ids": list(ids)})

    async def delete(self, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Those of `ids` that were the agent's passages, deleted."""
        query = text("DELETE FROM archival_passages WHERE agent_id = :agent_id AND id = ANY(CAST(:ids AS uuid[])) RETURNING id")
        return set((await self.session.execute(query, {"agent_id": agent_id, "ids": list(ids)})).scalars())

    async def drop_sources(self, agent_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, bool]:
        """`ids` (erased) are no longer among any passage's sources, the others kept in their order; the passages
        that lost one, each with whether it is left with none."""
        query = text("""
            UPDATE archival_passages
            SET sources = ARRAY(
                SELECT s FROM unnest(sources) WITH ORDINALITY AS u(s, n) WHERE s <> ALL(CAST(:ids AS uuid[])) ORDER BY n
            )
            WHERE agent_id = :agent_id AND sources <> '{}' AND sources && CAST(:ids AS uuid[])
            RETURNING id, sources = '{}' AS emptied
        """)
        return {row.id: row.emptied for row in await self.session.execute(query, {"agent_id": agent_id, "ids": list(ids)})}


# pg_advisory_xact_lock(int4, int4) for passage keys: a key space of its own (app/memory/search/agent_indexes.py
# takes another; turns and jobs take single-bigint keys, which never meet two-int4 ones).
KEY_LOCKS = 0x6B79


def key_lock(agent_id: uuid.UUID, key: str) -> int:
    """A key's lock id: 32 bits of a digest of agent and key (two keys that share one only wait on each other)."""
    return int.from_bytes(hashlib.blake2b(f"{agent_id}/{key}".encode(), digest_size=4).digest(), "big", signed=True)
