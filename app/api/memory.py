import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Request, Response

from app.api.deps import AgentDep, AgentIdDep, ArchivalMemoryDep, CoreMemoryDep, RecallMemoryDep, SettingsDep
from app.api.errors import ERROR_RESPONSES, ErrorBody
from app.chat.forgetting import forget_message
from app.errors import NotFound, PayloadTooLarge, PreconditionFailed, Unprocessable
from app.memory.archival.erasure import erase_passage
from app.memory.archival.service import NewPassage
from app.memory.archival.timeline import supersede
from app.memory.archival.validity import Validity
from app.memory.schemas import (
    LABEL_PATTERN,
    MAX_BATCH_ITEMS,
    MAX_QUERY_CHARS,
    MAX_TAGS,
    AskersInstant,
    BlockRead,
    BlockWrite,
    CoreMemoryRead,
    MessageErasureRead,
    MessageRead,
    PassageBatchCreate,
    PassageBatchRead,
    PassageCreate,
    PassageErasureRead,
    PassageRead,
    PassageSupersede,
    RevisionRead,
)
from app.memory.search.query import Mode, SearchQuery
from app.pagination import Page
from app.runtime import runtime

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["memory"], responses=ERROR_RESPONSES)

Label = Annotated[str, Path(pattern=LABEL_PATTERN, description="block label")]
Tags = Annotated[list[str] | None, Query(max_length=MAX_TAGS, description="only passages carrying all these tags")]
AsOf = Annotated[
    AskersInstant | None,
    Query(
        description="read memory as it was at this time (ISO 8601; without a zone, UTC); times a query names relative "
        "to now (yesterday, last week) are read from it, in its zone"
    ),
]


def parse_if_match(value: str | None) -> int | None:
    if value is None:
        return None
    cleaned = value.strip().removeprefix("W/").strip('"')
    if not cleaned.isdigit():
        raise Unprocessable("If-Match must be a block version number, as returned in `version` or the ETag header")
    return int(cleaned)


def split_tags(tags: list[str] | None) -> list[str] | None:
    return [t for raw in tags for t in raw.split(",")] if tags else None


@router.get("/memory")
async def get_core_memory(agent: AgentDep, core: CoreMemoryDep, as_of: AsOf = None) -> CoreMemoryRead:
    """Core memory: every block with its value, limit and version; with `as_of`, the blocks as they were then (each
    at its revision of then, `updated_at` that revision's time; limit, description and read-only as they are now)."""
    if as_of is None:
        return CoreMemoryRead(blocks=[BlockRead.of(b) for b in await core.blocks_of(agent.id)])
    return CoreMemoryRead(
        blocks=[
            BlockRead.of(b, value=r.value, version=r.version, updated_at=r.created_at)
            for b, r in await core.as_of(agent.id, as_of)
        ]
    )


@router.put(
    "/memory/{label}",
    responses={
        201: {"model": BlockRead, "description": "Block created (`If-None-Match: *`)"},
        404: {"model": ErrorBody, "description": "No block with this label (the detail lists the agent's blocks)"},
        412: {"model": ErrorBody, "description": "If-Match names a stale version, or `If-None-Match: *` a block that exists"},
    },
)
async def put_core_memory_block(
    agent: AgentDep,
    label: Label,
    body: BlockWrite,
    core: CoreMemoryDep,
    response: Response,
    if_match: Annotated[str | None, Header(description="the version you read; 412 when the block moved on")] = None,
    if_none_match: Annotated[
        str | None, Header(description="`*`: create the block (412 if it exists); without it, the block must exist")
    ] = None,
) -> BlockRead:
    """Replace a block's value, or restore an earlier version (and optionally set limit, description, read-only).
    A new block is created only with `If-None-Match: *`, so that a mistyped label is a 404, not a new block."""
    create = if_none_match is not None
    if if_none_match is not None and if_none_match.strip() != "*":
        raise Unprocessable("If-None-Match takes `*` alone: create the block, only if it does not exist")
    value = body.value if body.restore_version is None else await core.revision_value(agent.id, label, body.restore_version)
    assert value is not None
    try:
        block = await core.write(
            agent.id,
            label,
            value,
            source="api",
            expected_version=parse_if_match(if_match),
            limit=body.limit,
            description=body.description,
            read_only=body.read_only,
            create=create,
        )
    except NotFound as exc:
        raise NotFound(f"{exc.detail} (to create one, send If-None-Match: *)") from None
    except PreconditionFailed as exc:
        if not create:
            raise
        raise PreconditionFailed(f"{exc.detail}: If-None-Match: * only creates (use If-Match to edit)") from None
    response.status_code = 201 if create else 200
    response.headers["ETag"] = f'"{block.version}"'
    return BlockRead.of(block)


@router.get("/memory/{label}/history")
async def get_core_memory_history(agent: AgentDep, label: Label, core: CoreMemoryDep) -> Page[RevisionRead]:
    """Every revision of a block, newest first, with who made it (agent or api) and in which turn."""
    revisions = await core.history(agent.id, label)
    return Page[RevisionRead](items=[RevisionRead.of(r) for r in revisions])


@router.post(
    "/archival",
    status_code=201,
    responses={
        200: {"model": PassageRead, "description": "A near-duplicate was already stored: that passage"},
        409: {
            "model": ErrorBody,
            "description": "A current passage holds the key (`key_taken`, naming it), or a concurrent request changed the "
            "same thing",
        },
    },
)
async def add_passage(agent_id: AgentIdDep, body: PassageCreate, archival: ArchivalMemoryDep, response: Response) -> PassageRead:
    """Add one passage to archival memory (embedded on insert; a near-duplicate returns the stored one, 200)."""
    [stored] = await archival.add(agent_id, [NewPassage.of(body)])
    if stored.duplicate:
        response.status_code = 200
    return PassageRead.of(stored.passage, duplicate=stored.duplicate)


@router.post(
    "/archival/batch",
    status_code=201,
    responses={413: {"model": ErrorBody, "description": "Too large to embed while the client waits: use the import job"}},
)
async def add_passages(
    agent_id: AgentIdDep, body: PassageBatchCreate, archival: ArchivalMemoryDep, settings: SettingsDep
) -> PassageBatchRead:
    """Add a small batch of passages at once (up to 500 and ENGRAM_MAX_BATCH_CHARS characters; more is a 413 pointing
    to `POST …/archival/import`, a job with progress); near-duplicates come back as the stored passage with
    `duplicate: true`."""
    chars = sum(len(item.content) for item in body.items)
    if len(body.items) > MAX_BATCH_ITEMS or chars > settings.max_batch_chars:
        raise PayloadTooLarge(
            f"{len(body.items)} passages of {chars} characters are more than a batch embeds while you wait (at most "
            f"{MAX_BATCH_ITEMS} passages and {settings.max_batch_chars} characters): send them as an import job, "
            f"POST /v1/agents/{agent_id}/archival/import (JSON lines or a JSON array; answered at once, with progress)"
        )
    stored = await archival.add(agent_id, [NewPassage.of(item) for item in body.items], itemised=True)
    return PassageBatchRead(items=[PassageRead.of(s.passage, duplicate=s.duplicate) for s in stored])


@router.post(
    "/archival/{passage_id}/supersede",
    status_code=201,
    responses={
        200: {"model": PassageRead, "description": "A current passage with the same text is the successor: that passage"},
        409: {"model": ErrorBody, "description": "The passage is already superseded (the detail names its successor)"},
    },
)
async def supersede_passage(
    agent_id: AgentIdDep, passage_id: uuid.UUID, body: PassageSupersede, archival: ArchivalMemoryDep, response: Response
) -> PassageRead:
    """Store the fact that replaces a passage, and close the old one: it stays, valid until the new one's
    `occurred_at` and `superseded_by` it, out of default reads but found `as_of` an earlier time (or with
    `include_superseded`). Returns the new passage."""
    stored = await supersede(archival, agent_id, passage_id, **body.model_dump(exclude_none=True))  # None: the old one's
    if stored.duplicate:
        response.status_code = 200
    return PassageRead.of(stored.passage, duplicate=stored.duplicate)


@router.get("/archival")
async def search_or_list_passages(
    agent: AgentDep,
    archival: ArchivalMemoryDep,
    query: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="search text; omit to list")] = None,
    k: Annotated[int, Query(ge=1, le=100, description="results of a search")] = 10,
    min_score: Annotated[float, Query(ge=0, le=1, description="drop search results scoring below this")] = 0.0,
    mode: Annotated[Mode, Query(description="hybrid (default), or one side alone: vector or text")] = "hybrid",
    tags: Tags = None,
    after: Annotated[datetime | None, Query(description="only passages stored after this time")] = None,
    before: Annotated[datetime | None, Query(description="only passages stored before this time")] = None,
    as_of: AsOf = None,
    include_superseded: Annotated[bool, Query(description="superseded passages too (default: current ones only)")] = False,
    limit: Annotated[int, Query(ge=1, le=200, description="page size of a listing")] = 50,
    cursor: str | None = None,
) -> Page[PassageRead]:
    """Hybrid search (vector + BM25 full-text, scores fused) with `query`; otherwise list newest first (by when
    stored). Current passages only (not superseded; a fact dated in the future is current), unless `as_of` asks
    for those valid then (`occurred_at` by then, and `valid_until` unset or later) or `include_superseded` for all."""
    if as_of is not None and include_superseded:
        raise Unprocessable("give as_of (what was valid then) or include_superseded (everything), not both")
    validity = Validity(as_of=as_of, include_superseded=include_superseded)
    tag_list = split_tags(tags)
    if query is not None:
        search = SearchQuery(query, k=k, after=after, before=before, mode=mode, now=as_of)  # "yesterday": before as_of
        matches = await archival.search(agent.id, search, tags=tag_list, min_score=min_score, validity=validity)
        return Page[PassageRead](items=[PassageRead.of(p, score=hit.score, similarity=hit.similarity) for p, hit in matches])
    page, next_cursor = await archival.page(
        agent.id, limit=limit, cursor=cursor, tags=tag_list, after=after, before=before, validity=validity
    )
    return Page[PassageRead](items=[PassageRead.of(p) for p in page], next_cursor=next_cursor)


@router.get("/archival/{passage_id}")
async def get_passage(agent: AgentDep, passage_id: uuid.UUID, archival: ArchivalMemoryDep) -> PassageRead:
    """Read one passage."""
    return PassageRead.of(await archival.get(agent.id, passage_id))


@router.delete("/archival/{passage_id}")
async def delete_passage(agent: AgentDep, passage_id: uuid.UUID, archival: ArchivalMemoryDep) -> PassageErasureRead:
    """Delete one passage, and the passages drawn from it alone (`sources`), down the chain; a passage drawn also
    from something else stays, without it among its sources. The passages a deleted one superseded become current
    again; superseding takes nothing along. Answers what went with it."""
    erasure = await erase_passage(archival, agent.id, passage_id)
    return PassageErasureRead(id=passage_id, erased_passages=erasure.passages, sources_trimmed=erasure.trimmed)


@router.get("/messages")
async def list_messages(
    agent: AgentDep,
    recall: RecallMemoryDep,
    query: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="search text; omit to list")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    after: datetime | None = None,
    before: datetime | None = None,
    cursor: str | None = None,
    include_context: Annotated[bool, Query(description="search also the messages still in the LLM context")] = False,
) -> Page[MessageRead]:
    """Recall memory: every message, newest first; with `query`, a hybrid search over user and assistant messages
    that have left the context (all of them with `include_context=true`)."""
    if query is not None:
        hits = await recall.search(
            agent.id,
            SearchQuery(query, k=limit, after=after, before=before),
            below_seq=None if include_context else agent.context_start_seq,
        )
        return Page[MessageRead](items=[MessageRead.of(m, score=h.score) for m, h in hits])
    messages, next_cursor = await recall.page(agent.id, limit=limit, cursor=cursor, after=after, before=before)
    return Page[MessageRead](items=[MessageRead.of(m) for m in messages], next_cursor=next_cursor)


@router.delete(
    "/messages/{message_id}",
    responses={
        409: {
            "model": ErrorBody,
            "description": "A turn or memory pass of the agent is still running after ENGRAM_TURN_LOCK_TIMEOUT_SECONDS",
        },
        422: {
            "model": ErrorBody,
            "description": "Invalid input, or the message is a tool's result, which goes with its call (the detail names it)",
        },
    },
)
async def delete_message(agent_id: AgentIdDep, message_id: uuid.UUID, request: Request) -> MessageErasureRead:
    """Forget one message: it leaves recall memory (its text, vector and word statistics: no search finds it) and the
    agent's context, with the passages drawn from it alone (`sources`, down the chain; one drawn also from something
    else stays, without it). An assistant's message takes the results of its tool calls along. Its turn's record and
    later search results that quoted it say `[erased]` instead; a running summary that may quote it is replaced by a
    pointer to recall memory. Waits for a running turn or memory pass of the agent to end. Answers what went with it."""
    forgotten = await forget_message(runtime(request.app).turn_streams.turns, agent_id, message_id)
    erased = forgotten.erased
    return MessageErasureRead(
        id=message_id,
        erased_messages=erased.ids,
        erased_passages=erased.erasure.passages,
        sources_trimmed=erased.erasure.trimmed,
        summary_withdrawn=forgotten.summary_withdrawn,
    )
