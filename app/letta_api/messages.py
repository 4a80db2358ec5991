"""Letta's messages: a turn sent with `messages.create` (a LettaResponse once it has run, or server-sent events
with `streaming: true`), `messages.stream` (the same events), and the conversation with `messages.list`. A turn runs
through Engram's TurnStreams, so its steps reach the client while it runs, and quotas, the turn lock and recovery
apply as to any turn."""

import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from app.api import sse
from app.api.chat import StreamsDep, unless_llm_failed
from app.api.deps import MeterDep, RecallMemoryDep
from app.api.errors import ERROR_RESPONSES, TURN_ERROR_RESPONSES
from app.chat.events import ErrorEvent, Event, TurnCompleted
from app.chat.schemas import ChatResponse
from app.delivery.stream import chained
from app.errors import EngramError
from app.letta_api.common import LettaAgentDep, LettaAgentIdDep
from app.letta_api.letta_messages import (
    LettaErrorMessage,
    LettaMessage,
    LettaMessageRequest,
    LettaResponse,
    LettaStopReason,
    MessageType,
)
from app.letta_api.paging import WALK_PAGE, LettaPage, paging, walk
from app.letta_api.translate import STOP_REASONS, TurnMessages, run_id, stored_messages, usage_of
from app.memory.models import Message

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["letta"], responses=ERROR_RESPONSES)

TURN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "streaming: Letta's messages as server-sent events (`data: <json>`), then `data: [DONE]`",
        "content": sse.OPENAPI_CONTENT,
    },
    **TURN_ERROR_RESPONSES,
}


@router.post("/messages", response_model=LettaResponse, responses=TURN_RESPONSES)
async def create_message(agent_id: LettaAgentIdDep, body: LettaMessageRequest, streams: StreamsDep, meter: MeterDep) -> Any:
    """Run a turn with the user's message: the agent's steps as Letta's messages, the stop reason and the usage.
    A turn the LLM failed is a 502 (the message stays stored); with `streaming: true`, server-sent events."""
    return await _turn(agent_id, body, streams, meter, stream=body.streaming)


@router.post("/messages/stream", responses=TURN_RESPONSES)
async def stream_message(agent_id: LettaAgentIdDep, body: LettaMessageRequest, streams: StreamsDep, meter: MeterDep) -> Any:
    """Run a turn and stream its steps as server-sent events while it runs: each step's messages as they happen
    (with `stream_tokens`, the reply in pieces as the LLM writes it), then the stop reason and the usage."""
    return await _turn(agent_id, body, streams, meter, stream=True)


async def _turn(agent_id: uuid.UUID, body: LettaMessageRequest, streams: StreamsDep, meter: MeterDep, *, stream: bool) -> Any:
    tokens = stream and body.stream_tokens
    events = streams.follow(agent_id, body.turn_message(), None, meter, deltas=tokens)
    first = await anext(events)  # a refused turn (busy agent, no LLM, a quota) raises here, as an HTTP error
    assert first.turn_id is not None
    messages = TurnMessages(
        use_assistant_message=body.use_assistant_message, include=body.include_return_message_types, tokens=tokens
    )
    if stream:
        frames = _frames(first, events, messages)
        return sse.event_stream(frames, _failure, about=f"streamed Letta turn of agent {agent_id}", last=sse.DONE)
    collected = [first] + [event async for event in events]
    turn = unless_llm_failed(ChatResponse.of(first.turn_id, collected))
    return LettaResponse(
        messages=[m for event in collected for m in messages.of(event)],
        stop_reason=LettaStopReason(stop_reason=STOP_REASONS[turn.stop_reason] if turn.stop_reason else "error"),
        usage=usage_of(turn.turn_id, turn.usage),
    )


def _data(item: BaseModel) -> bytes:
    return sse.frame(_json(item.model_dump(mode="json")))


async def _frames(first: Event, rest: AsyncIterator[Event], messages: TurnMessages) -> AsyncIterator[bytes]:
    """Letta's stream: each message as it happens, an error_message where the turn met one, the stop reason and
    the usage once it ends (then `[DONE]`)."""
    async for event in chained(first, rest):
        for message in messages.of(event):
            yield _data(message)
        if isinstance(event, ErrorEvent) and event.turn_id is not None:
            yield _data(LettaErrorMessage(run_id=run_id(event.turn_id), error_type=event.code, message=event.detail))
        elif isinstance(event, TurnCompleted):
            yield _data(LettaStopReason(stop_reason=STOP_REASONS[event.stop_reason]))
            yield _data(usage_of(event.turn_id, event.usage))


def _failure(exc: Exception) -> bytes:
    """A turn that fails after it started ends with an `error` event."""
    code, detail = (exc.code, exc.detail) if isinstance(exc, EngramError) else ("turn_failed", type(exc).__name__)
    return sse.frame(_json({"error": code, "detail": detail}), event="error")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


Shown = Callable[[Message], list[LettaMessage]]


async def shown_as(
    use_assistant_message: bool = True, include_return_message_types: Annotated[list[MessageType] | None, Query()] = None
) -> Shown:
    """A stored message as Letta lists it, of the types asked for (a dependency of its own so that, as in Letta's API,
    these parameters follow the paging ones)."""
    include = set(include_return_message_types) if include_return_message_types is not None else None

    def shown(message: Message) -> list[LettaMessage]:
        parts = stored_messages(message, use_assistant_message=use_assistant_message)
        return [p for p in parts if include is None or p.message_type in include]

    return shown


@router.get("/messages")
async def list_messages(
    agent: LettaAgentDep,
    recall: RecallMemoryDep,
    page: Annotated[LettaPage, paging("desc")],
    shown: Annotated[Shown, Depends(shown_as)],
) -> list[LettaMessage]:
    """The conversation (recall memory), newest first unless `order=asc`; `limit` counts stored messages, each of
    which may show as several of Letta's (a step's reasoning, tool calls and reply share its id, as in Letta)."""

    async def fetch(cursor: str | None) -> tuple[Sequence[Message], str | None]:
        return await recall.page(agent.id, limit=WALK_PAGE, cursor=cursor)

    async def visible() -> AsyncIterator[Message]:  # a message that shows as nothing is no page's item
        async for message in walk(fetch):
            if shown(message):
                yield message

    listed: list[LettaMessage] = []
    for message in await page.walked(visible(), lambda m: m.id, "message"):
        parts = shown(message)
        listed.extend(reversed(parts) if page.order == "desc" else parts)
    return listed
