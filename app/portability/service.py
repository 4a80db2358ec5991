"""Export an agent to one document, and import a document (or a Letta agent file) as a new agent, atomically: the
import runs in the caller's transaction and writes nothing until everything has been checked and embedded."""

import json
import uuid
from bisect import bisect_right
from collections import defaultdict
from typing import Any

from pydantic import ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.agents.schemas import AgentRead
from app.agents.service import name_taken
from app.chat.events import event_adapter
from app.chat.models import Turn, TurnEvent
from app.errors import Conflict, Unprocessable, format_validation
from app.llm.embeddings import Embedder
from app.memory.archival.service import ArchivalMemory
from app.memory.models import ArchivalPassage, MemoryBlock, MemoryBlockRevision, Message
from app.memory.recall.service import RecallMemory
from app.memory.search import lexical
from app.models_base import utcnow
from app.portability import letta
from app.portability.repository import PortabilityRepository
from app.portability.schemas import (
    AgentDoc,
    AgentDocument,
    BlockDoc,
    ImportResult,
    MessageDoc,
    PassageDoc,
    RevisionDoc,
    TurnDoc,
    decode_vector,
    encode_vector,
)
from app.request_body import NUL_REFUSED, nul_at

EMBED_BATCH = 64


async def export_agent(session: AsyncSession, agent: Agent, embedder: Embedder, *, embeddings: bool = True) -> AgentDocument:
    rows = PortabilityRepository(session)
    blocks = await rows.blocks(agent.id)
    history: dict[uuid.UUID, list[RevisionDoc]] = defaultdict(list)
    for r in await rows.revisions(agent.id):
        history[r.block_id].append(RevisionDoc.of(r))
    events: dict[uuid.UUID, list[dict[str, Any]]] = defaultdict(list)
    for e in await rows.events(agent.id):
        events[e.turn_id].append(e.payload)

    messages = await rows.messages(agent.id)
    seqs = [m.seq or 0 for m in messages]

    def passed_over(turn: Turn) -> int | None:
        return bisect_right(seqs, turn.through_seq) if turn.through_seq is not None else None

    def vector(row: ArchivalPassage | Message) -> dict[str, str | None]:
        if not embeddings or row.embedding is None:
            return {"embedding": None, "embedding_model": None}
        return {"embedding": encode_vector(row.embedding), "embedding_model": row.embedding_model}

    passages = await rows.passages(agent.id)
    in_document = {p.id for p in passages} | {m.id for m in messages}

    def passage(row: ArchivalPassage) -> PassageDoc:
        # only sources the document holds: one erased without its passage being told would make it refuse itself
        sources = [s for s in row.sources if s in in_document and s != row.id]
        return PassageDoc.of(row, sources=sources, **vector(row))

    return AgentDocument(
        exported_at=utcnow(),
        embedding_model=embedder.model if embeddings else None,
        embedding_dim=embedder.dim if embeddings else None,
        agent=AgentDoc.of(agent, context_start=await rows.messages_before(agent.id, agent.context_start_seq)),
        blocks=[BlockDoc.of(b, history=history[b.id]) for b in blocks],
        passages=[passage(p) for p in passages],
        messages=[MessageDoc.of(m, **vector(m)) for m in messages],
        turns=[TurnDoc.of(t, events=events[t.id], passed_over=passed_over(t)) for t in await rows.turns(agent.id)],
    )


def read_upload(body: Any) -> tuple[AgentDocument, letta.Report | None]:
    """An Engram export, or a Letta agent file translated into one (with what did not carry over). A file
    serialised twice (a JSON string holding the JSON, as some Letta exports are) is read through."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError as exc:
            raise Unprocessable(f"the body is a string that is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise Unprocessable("expected a JSON object: an Engram export or a Letta agent file (.af)")
    if (where := nul_at(body)) is not None:
        raise Unprocessable(f"{where}: {NUL_REFUSED}")
    if "format" in body:
        if body["format"] != "engram.agent":
            raise Unprocessable(f"unknown format {body['format']!r}: expected 'engram.agent'")
        return _validated(body), None
    if letta.looks_like_agent_file(body):
        document, report = letta.to_document(body)
        return _validated(document), report
    raise Unprocessable(
        'neither an Engram export (no "format": "engram.agent") nor a Letta agent file (no "agents", "core_memory" '
        'or "memory_blocks")'
    )


def without_messages(document: AgentDocument) -> AgentDocument:
    """The document without its conversation (Letta's `strip_messages`): no message comes along, so none is a
    passage's source; a passage drawn only from messages is stored as given, without sources."""
    passage_ids = {p.id for p in document.passages}
    passages = [p.model_copy(update={"sources": [s for s in p.sources if s in passage_ids]}) for p in document.passages]
    agent = document.agent.model_copy(update={"context_start": 0})
    return document.model_copy(update={"messages": [], "passages": passages, "agent": agent})


def _validated(body: dict[str, Any]) -> AgentDocument:
    try:
        document = AgentDocument.model_validate(body)
    except ValidationError as exc:
        raise Unprocessable(describe(exc)) from None
    for i, turn in enumerate(document.turns):
        for j, event in enumerate(turn.events):
            try:
                event_adapter.validate_python(event)
            except ValidationError as exc:
                raise Unprocessable(describe(exc, within=f"turns.{i}.events.{j}")) from None
    return document


def describe(exc: ValidationError, within: str = "") -> str:
    return "invalid agent document: " + format_validation(exc.errors(), within=within, limit=10)


async def import_document(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    document: AgentDocument,
    embedder: Embedder,
    *,
    name: str | None = None,
    report: letta.Report | None = None,
) -> ImportResult:
    """A new agent with new ids for everything; vectors of another model (or none) are computed before anything is
    written. A name the tenant already uses is refused: agents are also reached by name (an OpenAI `model`, the CLI),
    and a second one of the same name would make both unreachable that way."""
    source = document.agent
    name = name or source.name
    # Checked in a short session of its own, and the file embedded, before the caller's transaction opens: none waits
    # on the embedder. (An import of the same name meanwhile meets the unique index: a 409 all the same.)
    async with AsyncSession(session.bind) as probe:
        taken = await name_taken(probe, tenant_id, name)
    if taken:
        raise Conflict(f"an agent named {name!r} exists: import under another name with ?name=… (engram import --name …)")
    passage_vectors, message_vectors, embedded = await _vectors(document, embedder)
    rows = PortabilityRepository(session)
    agent = await rows.add(source.row(Agent, tenant_id=tenant_id, name=name))
    turn_ids = {t.id: uuid.uuid4() for t in document.turns}
    blocks = [b.row(MemoryBlock, agent_id=agent.id, char_limit=b.limit) for b in document.blocks]
    turns = [t.row(Turn, id=turn_ids[t.id], agent_id=agent.id) for t in document.turns]
    await rows.add_all([*blocks, *turns])
    revisions = [
        r.row(MemoryBlockRevision, agent_id=agent.id, block_id=block.id, turn_id=turn_ids.get(r.turn_id) if r.turn_id else None)
        for block, b in zip(blocks, document.blocks, strict=True)
        for r in b.history
    ]
    events = [
        TurnEvent(
            turn_id=turn_ids[t.id],
            seq=int(e.get("seq", i)),
            agent_id=agent.id,
            payload={**e, "agent_id": str(agent.id), "turn_id": str(turn_ids[t.id])},
        )
        for t in document.turns
        for i, e in enumerate(t.events)
    ]
    passages = [
        p.row(
            ArchivalPassage,
            agent_id=agent.id,
            embedding=vector,
            embedding_model=embedder.model,
            occurred_at=p.occurred_at or p.created_at,
            superseded_by=None,  # set below, once the successor has its new id
            key=None if p.superseded_by else p.key,  # a superseded one's too: current until then, it would hold the key
            sources=[],  # set below, from every row's new id
        )
        for p, vector in zip(document.passages, passage_vectors, strict=True)
    ]
    messages = [
        _message(agent.id, m, turn_ids, vector, embedder.model)
        for m, vector in zip(document.messages, message_vectors, strict=True)
    ]
    # Rows have their new ids once made: sources (no foreign key) are mapped before anything is written.
    new_ids = {p.id: row.id for p, row in zip(document.passages, passages, strict=True)}
    new_ids |= {m.id: row.id for m, row in zip(document.messages, messages, strict=True)}
    for p, row in zip(document.passages, passages, strict=True):
        row.sources = [new_ids[source] for source in p.sources]
    await rows.add_all([*revisions, *events])
    await ArchivalMemory(session, embedder).add_as_given(passages)
    await RecallMemory(session).add_all(messages)
    # Successors by their new ids, once every passage is stored (a passage may come before the one replacing it).
    superseded = [(row, p.superseded_by, p.key) for p, row in zip(document.passages, passages, strict=True) if p.superseded_by]
    for row, successor, key in superseded:
        row.superseded_by, row.key = new_ids[successor], key
    if superseded:
        await rows.add_all([row for row, _, _ in superseded])
    agent.context_start_seq = _context_start_seq(messages, source.context_start)
    passes = [(turn, t.passed_over) for turn, t in zip(turns, document.turns, strict=True) if t.passed_over is not None]
    for turn, count in passes:
        turn.through_seq = _flushed_seq(messages[min(count, len(messages)) - 1]) if count and messages else 0
    if passes:
        await rows.add_all([turn for turn, _ in passes])
    await rows.add(agent)
    return ImportResult(
        agent=AgentRead.of(agent, blocks=blocks),
        source="letta" if report else "engram",
        blocks=len(blocks),
        revisions=len(revisions),
        passages=len(passages),
        messages=len(messages),
        turns=len(turns),
        embedded=embedded,
        skipped_tools=report.skipped_tools if report else [],
        mapped_tools=report.mapped_tools if report else {},
        notes=report.notes if report else [],
    )


def _context_start_seq(messages: list[Message], start: int) -> int:
    """The seq from which the imported messages are in context, `start` of them (in order) having left it."""
    if not start:
        return 0
    if start < len(messages):
        return _flushed_seq(messages[start])
    return _flushed_seq(messages[-1]) + 1


def _flushed_seq(message: Message) -> int:
    if message.seq is None:  # the flush gives every message its seq (an identity column)
        raise RuntimeError("a message has no seq before it is flushed")
    return message.seq


def _message(
    agent_id: uuid.UUID, m: MessageDoc, turn_ids: dict[uuid.UUID, uuid.UUID], vector: list[float] | None, model: str
) -> Message:
    return m.row(
        Message,
        agent_id=agent_id,
        turn_id=turn_ids.get(m.turn_id) if m.turn_id else None,
        tool_calls=_calls(m),
        occurred_at=m.occurred_at or m.created_at,
        embedding=vector,
        embedding_model=model if vector is not None else None,
    )


def _calls(m: MessageDoc) -> list[dict[str, Any]] | None:
    return None if m.tool_calls is None else [call.model_dump() for call in m.tool_calls]


def _usable(encoded: str | None, model: str | None, embedder: Embedder) -> list[float] | None:
    if encoded is None or model != embedder.model:
        return None
    vector = decode_vector(encoded)
    return vector if len(vector) == embedder.dim else None


async def _vectors(document: AgentDocument, embedder: Embedder) -> tuple[list[list[float]], list[list[float] | None], int]:
    """The document's vectors where they are this server's model's; the others embedded again now (passages always
    need one; user and assistant messages with text get one, as after a turn)."""
    passages: list[list[float] | None] = [_usable(p.embedding, p.embedding_model, embedder) for p in document.passages]
    messages: list[list[float] | None] = [_usable(m.embedding, m.embedding_model, embedder) for m in document.messages]
    todo: list[tuple[list[list[float] | None], int, str]] = [
        (passages, i, p.content) for i, p in enumerate(document.passages) if passages[i] is None
    ]
    for i, m in enumerate(document.messages):
        if messages[i] is None and m.role in ("user", "assistant"):
            text = Message(role=m.role, content=m.content, tool_calls=_calls(m)).recall_text()
            if lexical.search_text(text):
                todo.append((messages, i, text))
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        for (target, i, _), vector in zip(batch, await embedder.embed_passages([t for _, _, t in batch]), strict=True):
            target[i] = vector
    return [v or [] for v in passages], messages, len(todo)
