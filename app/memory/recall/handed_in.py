"""Conversations handed in by services that run their own LLM (mem0's main use): stored in recall memory, embedded
and dated as given, without running the agent. They never enter the agent's context window (it took no part in
them); conversation_search, automatic recollection, `GET …/messages` and memory passes read them."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.errors import Conflict
from app.llm.embeddings import Embedder
from app.memory.models import Message
from app.memory.recall.repository import MessageRepository
from app.memory.schemas import HandedInMessage

EMBED_BATCH = 64


@dataclass
class HandIn:
    message_ids: list[uuid.UUID]  # in the order given; a repeat's is the one stored earlier
    stored: int


def _differences(item: HandedInMessage, stored: Message) -> list[str]:
    """What makes `item` another message than the one stored with its id: a retry repeats role and content, and the
    time when it gives one (without one, a message is dated when first stored: a retry cannot repeat that)."""
    given: dict[str, object] = {"role": item.role, "content": item.content}
    if item.occurred_at is not None:
        given["occurred_at"] = item.occurred_at
    return [field for field, value in given.items() if getattr(stored, field) != value]


def _refuse_reused_ids(items: Sequence[HandedInMessage], known: dict[str, Message]) -> None:
    reused = [
        f"{item.id!r} (other {' and '.join(fields)})"
        for item in items
        if item.id is not None and item.id in known and (fields := _differences(item, known[item.id]))
    ]
    if reused:
        raise Conflict(
            f"message ids handed in before with another message: {'; '.join(reused[:5])}"
            + (f" and {len(reused) - 5} more" if len(reused) > 5 else "")
            + ". A retry repeats each message as first handed in; a new message takes a new id"
        )


async def hand_in(session: AsyncSession, embedder: Embedder, agent_id: uuid.UUID, items: Sequence[HandedInMessage]) -> HandIn:
    """Store the messages not handed in before (by their ids), in the order given; an id handed in before with
    another message is a conflict (409), and nothing is stored."""
    messages = MessageRepository(session)
    known = await messages.with_external_ids(agent_id, [item.id for item in items if item.id is not None])
    _refuse_reused_ids(items, known)
    new = [item for item in items if item.id is None or item.id not in known]
    vectors: list[list[float]] = []
    for start in range(0, len(new), EMBED_BATCH):
        vectors += await embedder.embed_passages([item.content for item in new[start : start + EMBED_BATCH]])
    rows = []
    for item, vector in zip(new, vectors, strict=True):
        row = Message(
            agent_id=agent_id,
            role=item.role,
            content=item.content,
            embedding=vector,
            embedding_model=embedder.model,
            handed_in=True,
            external_id=item.id,
        )
        if item.occurred_at is not None:  # else when it is stored (occurred_field)
            row.occurred_at = item.occurred_at
        rows.append(row)
    try:
        async with session.begin_nested():
            await messages.add_all(rows)
    except IntegrityError as exc:
        raise Conflict("another request is handing in messages with the same ids; retry this one") from exc
    stored = iter(rows)
    ids = [known[item.id].id if item.id is not None and item.id in known else next(stored).id for item in items]
    return HandIn(message_ids=ids, stored=len(rows))
