"""Letta's core memory (an agent's blocks, by label) and archival memory (passages): over CoreMemory and
ArchivalMemory, with Engram's rules (block limits, near-duplicate passages) applying as they do everywhere."""

from collections.abc import Callable, Sequence
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from app.api.deps import ArchivalMemoryDep, CoreMemoryDep
from app.api.errors import ERROR_RESPONSES
from app.letta_api.common import LettaAgentDep, LettaAgentIdDep, UnsupportedInput, engram_id, letta_id
from app.letta_api.paging import WALK_PAGE, Before, Cursor, LettaPage, Limit, Order, ordered, paging, walk
from app.letta_api.schemas import (
    LettaBlock,
    LettaBlockUpdate,
    LettaDeleted,
    LettaPassage,
    LettaPassageCreate,
    LettaPassageSearchResponse,
    LettaSearchResult,
)
from app.memory.archival.erasure import erase_passage
from app.memory.archival.service import NewPassage
from app.memory.models import ArchivalPassage
from app.memory.schemas import MAX_QUERY_CHARS, MAX_TAGS, Instant
from app.memory.search.query import SearchQuery

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["letta"], responses=ERROR_RESPONSES)

Label = Annotated[str, Path(description="the block's label")]


@router.get("/core-memory/blocks")
async def list_blocks(agent: LettaAgentDep, core: CoreMemoryDep, page: Annotated[LettaPage, paging("asc")]) -> list[LettaBlock]:
    """The agent's blocks (in Engram's order; `order=desc` reverses it)."""
    return [LettaBlock.of(b) for b in page.cut(await core.blocks_of(agent.id), lambda b: b.id, "block")]


@router.get("/core-memory/blocks/{block_label}")
async def retrieve_block(agent: LettaAgentDep, block_label: Label, core: CoreMemoryDep) -> LettaBlock:
    """One block, by its label."""
    return LettaBlock.of(await core.get(agent.id, block_label))


@router.patch("/core-memory/blocks/{block_label}")
async def modify_block(agent: LettaAgentDep, block_label: Label, body: LettaBlockUpdate, core: CoreMemoryDep) -> LettaBlock:
    """Change a block's value, limit, description or read-only flag (a value over the limit is a 422 saying by how
    much; the block's history keeps every value, as for any write through Engram's API)."""
    if body.label is not None and body.label != block_label:
        raise UnsupportedInput("renaming a block: create one with the new label through Engram's API (docs/letta.md)")
    value: str | Callable[[str], str] = body.value if body.value is not None else (lambda current: current)
    block = await core.write(
        agent.id,
        block_label,
        value,
        source="api",
        limit=body.limit,
        description=body.description,
        read_only=body.read_only,
    )
    return LettaBlock.of(block)


@router.post("/archival-memory")
async def create_passage(agent_id: LettaAgentIdDep, body: LettaPassageCreate, archival: ArchivalMemoryDep) -> list[LettaPassage]:
    """Store a passage (one: Engram does not cut text into chunks). A near-duplicate of a stored passage is not
    stored again: the stored one comes back."""
    [stored] = await archival.add(agent_id, [NewPassage(content=body.text, tags=body.tags or [], occurred_at=body.created_at)])
    return [LettaPassage.of(stored.passage)]


@router.get("/archival-memory")
async def list_passages(
    agent: LettaAgentDep,
    archival: ArchivalMemoryDep,
    after: Cursor = None,
    before: Before = None,
    limit: Limit = 100,
    search: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="hybrid search")] = None,
    ascending: bool | None = None,
    order: Order | None = None,
) -> list[LettaPassage]:
    """The agent's current passages, oldest first unless `ascending=false`; with `search`, the best matches."""
    # Not the paging dependency: Letta's `search` stands among the paging parameters here, and a dependency's
    # parameters are listed after a route's own (the API's description would change).
    if search is not None:
        return [LettaPassage.of(p) for p, _ in await archival.search(agent.id, SearchQuery(search, k=min(limit, 100)))]

    async def fetch(cursor: str | None) -> tuple[Sequence[ArchivalPassage], str | None]:
        return await archival.page(agent.id, limit=WALK_PAGE, cursor=cursor)

    page = LettaPage(after, before, limit, ordered(order, ascending, "asc"))
    return [LettaPassage.of(p) for p in await page.walked(walk(fetch), lambda p: p.id, "passage")]


@router.get("/archival-memory/search")
async def search_passages(
    agent: LettaAgentDep,
    archival: ArchivalMemoryDep,
    query: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
    tags: Annotated[list[str] | None, Query(max_length=MAX_TAGS)] = None,
    tag_match_mode: Literal["any", "all"] = "any",
    top_k: Annotated[int | None, Query(ge=1, le=100)] = None,
    start_datetime: Annotated[Instant | None, Query(description="stored after this time")] = None,
    end_datetime: Annotated[Instant | None, Query(description="stored before this time")] = None,
) -> LettaPassageSearchResponse:
    """Hybrid search (meaning and words, any language) over the current passages, with Letta's tag and date filters."""
    k = top_k or 5
    # Engram filters by all the tags given: "any" of several is the union of one search per tag, best first.
    filters = [[tag] for tag in tags] if tags and tag_match_mode == "any" and len(tags) > 1 else [tags or None]
    search = SearchQuery(query, k=k, after=start_datetime, before=end_datetime)
    found = [match for tag_filter in filters for match in await archival.search(agent.id, search, tags=tag_filter)]
    best = {p.id: (p, hit) for p, hit in sorted(found, key=lambda m: m[1].score)}  # a passage found twice: its best score
    matches = sorted(best.values(), key=lambda m: m[1].score, reverse=True)[:k]
    results = [
        LettaSearchResult(id=letta_id("passage", p.id), content=p.content, timestamp=p.occurred_at.isoformat(), tags=p.tags)
        for p, _ in matches
    ]
    return LettaPassageSearchResponse(results=results, count=len(results))


@router.delete("/archival-memory/{memory_id}")
async def delete_passage(
    agent: LettaAgentDep, memory_id: Annotated[str, Path(description="passage-<uuid>")], archival: ArchivalMemoryDep
) -> LettaDeleted:
    """Delete a passage, and the passages drawn from it alone (Engram's erasure by provenance)."""
    await erase_passage(archival, agent.id, engram_id("passage", memory_id))
    return LettaDeleted(message=f"LettaMemory id={memory_id} successfully deleted")
