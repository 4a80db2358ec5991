"""Archival memory: passages, dated and embedded, searched by meaning and by words; near-duplicates are not stored
twice, and superseded facts stay for `as_of`."""

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal, Self

from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import Conflict, NotFound, Unprocessable
from app.llm.embeddings import Embedder
from app.memory.archival.repository import PassageRepository
from app.memory.archival.validity import CURRENT, Validity
from app.memory.models import ArchivalPassage
from app.memory.search import lexical
from app.memory.search.hybrid import Hit
from app.memory.search.query import SearchQuery
from app.pagination import decode_time_cursor, split_page

NEAR_DUPLICATE_CANDIDATE_SIMILARITY = 0.9


@dataclass
class Stored:
    passage: ArchivalPassage
    duplicate: bool


@dataclass(frozen=True, kw_only=True)
class NewPassage:
    """What a caller writes of a passage: each field is the row's column of the same name. Every write path carries
    it whole (`of` a request's body or a stored row), so a field added here and to the row is kept by all of them."""

    content: str
    tags: Sequence[str] = ()
    occurred_at: datetime | None = None  # None: when its sources were said, or now
    sources: Sequence[uuid.UUID] = ()  # what it was distilled from: this agent's messages and passages
    key: str | None = None  # the caller's name for it, unique among the agent's current passages

    @classmethod
    def of(cls, written: object, **given: Any) -> Self:
        """The passage `written` holds (a request's body, a stored row): its fields of these names, then `given`."""
        names = [f.name for f in fields(cls) if f.name not in given and hasattr(written, f.name)]
        return cls(**{name: getattr(written, name) for name in names}, **given)

    def columns(self) -> dict[str, Any]:
        """The row's columns as `add` stores them: tags normalised, each source once; no occurred_at when none is
        given (`add` dates it)."""
        written = {f.name: getattr(self, f.name) for f in fields(self)}
        written |= {"tags": normalise_tags(self.tags), "sources": list(dict.fromkeys(self.sources))}
        if self.occurred_at is None:
            del written["occurred_at"]
        return written


class KeyTaken(Conflict):
    code = "key_taken"


def same_text(a: ArchivalPassage, b: ArchivalPassage) -> bool:
    return lexical.fingerprint(a.content) == lexical.fingerprint(b.content)


def same_fact(stored: ArchivalPassage, candidate: ArchivalPassage, dated: datetime | None) -> bool:
    """The same text, and no date of its own (`dated`) that differs: the same words dated otherwise tell of another
    event (the gym on Monday, the gym on Friday). A keyed passage is its caller's record, never taken for another's
    (nor another for it): the same key (or none) on both."""
    return stored.key == candidate.key and same_text(stored, candidate) and (dated is None or stored.occurred_at == dated)


class ArchivalMemory:
    def __init__(self, session: AsyncSession, embedder: Embedder):
        self.passages = PassageRepository(session)
        self.embedder = embedder

    async def add(
        self,
        agent_id: uuid.UUID,
        news: Sequence[NewPassage],
        *,
        exclude: Sequence[uuid.UUID] = (),
        vectors: list[list[float]] | None = None,
        own_source: Literal["refuse", "drop"] = "refuse",
        itemised: bool = False,
    ) -> list[Stored]:
        """Embed and store passages; a near-duplicate of a current (or earlier in the batch) passage is not stored
        again, and its original is returned instead (never one of `exclude`). `vectors`: the contents' embeddings,
        when the caller computed them before its transaction (an import job). A near-duplicate naming its original
        among its sources is refused (422), or that source dropped (`own_source="drop"`: an import job, whose
        sources were checked when it was submitted). A passage with sources and no date of its own is dated when the
        latest of them was said: a fact holds from when it was said, not from when it was distilled (`as_of`).
        `itemised`: the request is a list of items (a batch), which a refusal names, counted from 0."""
        await self.claim_keys(agent_id, [new.key for new in news if new.key is not None])
        said = await self.check_sources(agent_id, *(new.sources for new in news), itemised=itemised)
        if vectors is None:
            vectors = await self.embedder.embed_passages([new.content for new in news])
        neighbours = await self.passages.nearest(
            agent_id, vectors, k=3, min_similarity=NEAR_DUPLICATE_CANDIDATE_SIMILARITY, exclude=exclude
        )
        stored: list[Stored] = []
        fresh: list[ArchivalPassage] = []
        for position, (new, vector, near) in enumerate(zip(news, vectors, neighbours, strict=True)):
            candidate = ArchivalPassage(agent_id=agent_id, embedding=vector, embedding_model=self.embedder.model, **new.columns())
            # undated: when its sources were said, or else the time it is stored (occurred_field)
            if new.occurred_at is None and any(s in said for s in new.sources):
                candidate.occurred_at = max(said[s] for s in new.sources if s in said)
            original = next((p for p in near if same_fact(p, candidate, new.occurred_at)), None) or next(
                (p for p in fresh if same_fact(p, candidate, new.occurred_at)), None
            )
            if original is None:
                fresh.append(candidate)
            elif original.id in candidate.sources and own_source == "refuse":
                raise Unprocessable(
                    f"{in_item(position) if itemised else ''}source {original.id} is the passage itself: the text is "
                    "that passage's, already stored (a passage is not distilled from itself)"
                )
            elif original.sources and (more := [s for s in candidate.sources if s not in original.sources]):
                # the same fact drawn again, from more: the stored one stands for those too. One stored as given
                # (no sources) stays so: nobody's derivative, no erasure of a line takes it along.
                await self.passages.add_sources(original, [s for s in more if s != original.id])
            stored.append(Stored(original or candidate, duplicate=original is not None))
        await self.passages.add_all(fresh)
        return stored

    async def add_as_given(self, passages: Sequence[ArchivalPassage]) -> None:
        """Stores passages made whole elsewhere (an agent's import: embedded, dated and linked already) as they are,
        without the near-duplicate check of `add`."""
        await self.passages.add_all(passages)

    async def check_sources(
        self, agent_id: uuid.UUID, *items: Sequence[uuid.UUID], itemised: bool = False
    ) -> dict[uuid.UUID, datetime]:
        """When each source was said; refuses (422) one that is not one of this agent's messages or passages, naming
        it (and its item, counted from 0, when the request is a list of items: `itemised`)."""
        ids = [s for sources in items for s in sources]
        said = await self.passages.source_times(agent_id, ids)
        if unknown := [i for i in ids if i not in said]:
            where = in_item(next(i for i, s in enumerate(items) if unknown[0] in s)) if itemised else ""
            raise Unprocessable(f"{where}source {unknown[0]} is not a message or passage of this agent")
        return said

    async def claim_keys(self, agent_id: uuid.UUID, keys: Sequence[str]) -> None:
        """Takes new passages' keys for this transaction (another writer of one waits: repository.lock_keys); refuses
        one given twice (422) or held by a current passage (409 naming it). Before any row lock: the keys' order."""
        if not keys:
            return
        if twice := [key for key, n in Counter(keys).items() if n > 1]:
            raise Unprocessable(f"key {twice[0]!r} is given to more than one passage: a key names one passage")
        await self.passages.lock_keys(agent_id, keys)
        if held := await self.passages.with_keys(agent_id, keys):
            key, passage = next(iter(held.items()))
            raise KeyTaken(
                f"key {key!r} is held by passage {passage.id}: PUT …/archival/keys/{key} supersedes it with a new version"
            )

    async def search(
        self,
        agent_id: uuid.UUID,
        query: SearchQuery,
        *,
        tags: list[str] | None = None,
        min_score: float = 0.0,
        vector: list[float] | None = None,
        validity: Validity = CURRENT,
    ) -> list[tuple[ArchivalPassage, Hit]]:
        """The best passages, each with its hit (score, similarity, the question a reply answers), as recall
        memory's search gives messages. `vector`: the query's embedding, when the caller has it already; `validity`:
        which passages (by default the current ones)."""
        embedding = vector if vector is not None else await self.embedder.embed_query(query.text)
        matches = await self.passages.hybrid_search(
            agent_id, query, embedding, tags=normalise_tags(tags or []), validity=validity
        )
        return [(passage, hit) for passage, hit in matches if hit.score >= min_score]

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


def in_item(position: int) -> str:
    """How a refusal names the item of a list of them (a batch, an import) it is about."""
    return f"item {position}: "


def normalise_tags(tags: Sequence[str]) -> list[str]:
    cleaned = [t.strip().lower() for t in tags if t and t.strip()]
    if any(len(t) > 64 for t in cleaned):
        raise Unprocessable("tags are at most 64 characters each")
    return list(dict.fromkeys(cleaned))
