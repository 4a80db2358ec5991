"""Recollection: the memories a model should see before it answers a message, within a budget of characters. The
chat path puts them into its system prompt at the start of a turn; `POST …/recollection` hands them to a service
that runs its own LLM. Both call `Recollector.recollect`, so the two never drift. The message is searched in every
searchable kind (app/memory/kinds.py: archival and recall memory, by the hybrid search); whether any hit goes in is
the gate's (gate.py), which ones the budget's (selection.py), and how they are written rendering.py's."""

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import reading
from app.llm.embeddings import Embedder
from app.memory.core.service import CoreMemory
from app.memory.kinds import KINDS, SEARCHABLE, Kind, Scope, SearchableKind
from app.memory.models import MemoryBlock
from app.memory.recollection.candidate import BUDGET_CHARS, Candidate
from app.memory.recollection.gate import PERSONAL, WINDOW_RATIO, acknowledges, coverage, min_margin
from app.memory.recollection.prompt_text import MEMORIES_HEADING, core_section, memories_section
from app.memory.recollection.rendering import arrange, render
from app.memory.recollection.selection import searched_for, select
from app.memory.search import lexical
from app.memory.search.baseline import baseline, embed_cohorts
from app.memory.search.hybrid import Hit
from app.memory.search.query import SearchQuery
from app.metrics import RECOLLECTED_MEMORIES, RECOLLECTIONS


@dataclass
class Recollection:
    """What recollection hands over: the memories in the order `body` lists them, `body` the section's lines (None:
    nothing), and `core` the core-memory section (when asked for)."""

    memories: list[Candidate] = field(default_factory=list)
    body: str | None = None
    core: str | None = None

    @property
    def chars(self) -> int:
        return len(self.body or "")

    def text(self, heading: str) -> str:
        """The prompt-ready block for a caller's own model: core memory, then the recollected memories under `heading`
        (prompt_text's RECOLLECTION_HEADING, or the chat path's MEMORIES_HEADING for a model that can search)."""
        return "\n\n".join(part for part in (self.core, self.under(heading)) if part)

    @property
    def section(self) -> str | None:
        """The memories' section as the chat path's system prompt has it (its agent can search for more)."""
        return self.under(MEMORIES_HEADING)

    def under(self, heading: str) -> str | None:
        """The memories' section under `heading`: the same lines whoever reads them."""
        return memories_section(self.body, heading) if self.body else None


async def ready(embedder: Embedder) -> None:
    """What recollection asks of the embedder besides the query's vector: the baseline's cohorts of fixed texts,
    embedded once per process. A turn asks for it with the query, before it reads its context: an embedder failing
    there costs the turn its recollections, not the turn, and no transaction waits on the embedder."""
    await embed_cohorts(embedder)


Caller = Literal["api", "mcp", "chat"]


@dataclass(frozen=True)
class CoreBlocks:
    """Which core blocks go with the memories: those labelled `only` (None: every one) but `leave_out`."""

    only: Sequence[str] | None = None
    leave_out: Sequence[str] = ()


class Recollector:
    """`elsewhere`: sessions for a second connection, on which the other kinds (recall memory) and core memory are
    read while the first (archival memory, app/memory/kinds.py) is searched on `session`; None: one after the other
    on `session`. `caller`: who asks, as the metrics count it."""

    def __init__(
        self,
        session: AsyncSession,
        embedder: Embedder,
        elsewhere: async_sessionmaker[AsyncSession] | None = None,
        *,
        caller: Caller = "api",
    ):
        self.session = session
        self.embedder = embedder
        self.elsewhere = elsewhere
        self.caller = caller

    async def hits(
        self,
        agent_id: uuid.UUID,
        query: str,
        embedding: list[float],
        *,
        searched: int,
        kinds: Sequence[Kind] = KINDS,
        as_of: datetime | None = None,
        below_seq: int | None = None,
    ) -> list[Candidate]:
        """The top `searched` hits of each kind asked for (the current passages, or those valid `as_of`; messages said
        by `as_of`, below `below_seq`, the context's start, as handed-in ones), with what the gate judges them on."""
        found, _ = await self._read(agent_id, query, embedding, searched, kinds, Scope(as_of, below_seq), core_blocks=None)
        return found

    async def _read(
        self,
        agent_id: uuid.UUID,
        query: str,
        embedding: list[float],
        searched: int,
        kinds: Sequence[Kind],
        scope: Scope,
        *,
        core_blocks: CoreBlocks | None,
    ) -> tuple[list[Candidate], str | None]:
        """The hits (`hits`) and the core-memory section of `core_blocks` (None: none)."""
        query_tokens = frozenset(lexical.query_terms(query))
        base = await baseline(self.embedder, embedding)

        def candidate(kind: SearchableKind[Any], row: Any, hit: Hit) -> Candidate:
            return Candidate(
                kind.name,
                row.id,
                kind.text(row),
                row.occurred_at,
                hit.similarity,
                base.margin(hit.similarity),
                coverage(query_tokens, row.search_text or ""),
                hit.score,
                kind.speaker(row),
                kind.written(row),
                hit.answers,
                terms=query_tokens,
                sources=kind.sources(row),
            )

        # one query, its terms, dates and speakers read once for every kind; "yesterday" is the day before `as_of`
        search = SearchQuery(query, k=searched, now=scope.as_of)
        first, *rest = SEARCHABLE  # the first on `session`; the rest, with core memory, on `elsewhere` meanwhile

        async def found(session: AsyncSession, among: Sequence[SearchableKind[Any]]) -> list[Candidate]:
            asked = [kind for kind in among if kind.name in kinds]
            return [
                candidate(kind, row, hit)
                for kind in asked
                for row, hit in await kind.search(session, self.embedder, agent_id, search, embedding, scope)
            ]

        async def rest_and_core(session: AsyncSession) -> tuple[list[Candidate], str | None]:
            return await found(session, rest), await core(session, agent_id, scope.as_of, core_blocks) if core_blocks else None

        if self.elsewhere is None or not (any(kind.name in kinds for kind in rest) or core_blocks):  # nothing to overlap
            here = await found(self.session, [first])
            there, section = await rest_and_core(self.session)
        else:
            async with reading(self.elsewhere) as other:
                here, (there, section) = await asyncio.gather(found(self.session, [first]), rest_and_core(other))
        return judged(here + there, search, base.personal), section

    async def recollect(
        self,
        agent_id: uuid.UUID,
        query: str,
        embedding: list[float] | None = None,
        *,
        budget: int = BUDGET_CHARS,
        kinds: Sequence[Kind] = KINDS,
        tags: list[str] | None = None,
        as_of: datetime | None = None,
        below_seq: int | None = None,
        repeats: Iterable[str] = (),
        core_blocks: CoreBlocks | None = None,
    ) -> Recollection:
        """The memories for `query` within `budget` characters (`select` over `hits`), and the core blocks of
        `core_blocks` as they stood `as_of` (None: no core memory). `embedding`: the query's, when the caller has it
        (the chat path embeds the message before its turn reads); None: embedded here, with what `ready` asks.
        `repeats`: texts the caller has in front of it already; `tags`: only passages carrying all of them."""
        if embedding is None:
            embedding = await self.embedder.embed_query(query)
            await ready(self.embedder)
        scope = Scope(as_of, below_seq, tags)
        found, section = await self._read(agent_id, query, embedding, searched_for(budget), kinds, scope, core_blocks=core_blocks)
        chosen = arrange(select(found, budget=budget, repeats=repeats))
        outcome = "memories" if chosen else "gated" if found else "acknowledged" if acknowledges(query) else "empty"
        RECOLLECTIONS.labels(self.caller, outcome).inc()
        if chosen:
            RECOLLECTED_MEMORIES.labels(self.caller).observe(len(chosen))
        return Recollection(chosen, render(chosen), section)


def judged(hits: list[Candidate], search: SearchQuery, personal: float) -> list[Candidate]:
    """`hits` with what their query asks of them: the margin for as many memories as were compared (`min_margin`).
    For a question about the asker's own past that names a time ("What did I do last week?", 先週末は何をした？), when
    memory holds something said then: only that, the best of it (within WINDOW_RATIO of its best score: "Which
    restaurant did I go to last weekend?" names a topic too), each evident. None for a message that only acknowledges
    ("Yes", "ok thanks", はい): alone, it asks nothing of memory."""
    if acknowledges(search.text):
        return []
    bar = min_margin(len(hits), personal)
    window = search.window if personal >= PERSONAL else []
    then = [h for h in hits if any(start <= h.occurred_at < stop for start, stop in window)]
    if then:
        best = max(h.score for h in then)
        return [replace(h, min_margin=bar, in_window=True) for h in then if h.score >= WINDOW_RATIO * best]
    return [replace(h, min_margin=bar) for h in hits]


async def core(
    session: AsyncSession, agent_id: uuid.UUID, as_of: datetime | None, blocks_wanted: CoreBlocks = CoreBlocks()
) -> str | None:
    """The core-memory section for a caller's model, the blocks as they stood `as_of` (None: now): those
    `blocks_wanted` names, in the order of their labels, without the empty ones (they tell a model
    nothing); None without any. The chat path's prompt has its own (app/chat/prompt.py: every block)."""
    memory = CoreMemory(session)
    if as_of is None:
        blocks: Sequence[MemoryBlock] = await memory.blocks_of(agent_id)
        values = [b.value for b in blocks]
    else:
        then = await memory.as_of(agent_id, as_of)
        blocks, values = [b for b, _ in then], [r.value for _, r in then]
    kept = [
        (b, v)
        for b, v in zip(blocks, values, strict=True)
        if (blocks_wanted.only is None or b.label in blocks_wanted.only) and b.label not in blocks_wanted.leave_out and v.strip()
    ]
    blocks, values = [b for b, _ in kept], [v for _, v in kept]
    return core_section(blocks, values) if blocks else None
