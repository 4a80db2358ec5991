"""What involves the agent's model or hands memory to yours: recollection, chat turns (whole or streamed), memory
passes, and turns read back."""

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engram_client._binding import M, Resource, endpoint
from engram_client._core import EventStream, Flow, Id, Pause, Route, opened
from engram_client._wire import ChatQuery, ChatRequest, Kind, RecollectionRequest
from engram_client.events import EVENT, Event, Turn
from engram_client.inputs import ConversationLine, When, instant
from engram_client.models import MemoryPass, Recollection

RECALL = Route("POST", "/v1/agents/{agent_id}/recollection", Recollection, body=RecollectionRequest)
CHAT = Route("POST", "/v1/agents/{agent_id}/chat", Turn, body=ChatRequest, headers=("Idempotency-Key",))
CHAT_STREAM = Route(
    "POST",
    "/v1/agents/{agent_id}/chat",
    str,
    body=ChatRequest,
    query=ChatQuery,
    headers=("Idempotency-Key",),
    accept="text/event-stream",
)
GET_TURN = Route("GET", "/v1/agents/{agent_id}/turns/{turn_id}", Turn)
MEMORY_PASS = Route("POST", "/v1/agents/{agent_id}/memory-pass", MemoryPass)


def recall(
    agent_id: Id,
    query: str | None = None,
    *,
    messages: Sequence[ConversationLine | Mapping[str, Any]] | None = None,
    max_chars: int | None = None,
    as_of: When | None = None,
    kinds: Iterable[Kind] | None = None,
    tags: Sequence[str] | None = None,
    core_blocks: Sequence[str] | None = None,
    include_core: bool | None = None,
    can_search: bool | None = None,
) -> Flow[Recollection]:
    """What your model should be handed before it answers `query` (or the last user line of `messages`, the recent
    conversation): core memory but `persona`, then the memories that bear on it, dated, within `max_chars`
    (default 1,500); "" when memory holds nothing about it. `kinds`: archival and/or recall memory."""
    request = RecollectionRequest(
        query=query,
        messages=None if messages is None else [ConversationLine.model_validate(m) for m in messages],
        max_chars=max_chars,
        as_of=instant(as_of),
        kinds=None if kinds is None else list(kinds),
        tags=None if tags is None else list(tags),
        core_blocks=None if core_blocks is None else list(core_blocks),
        include_core=include_core,
        can_search=can_search,
    )
    return RECALL.call(agent_id=agent_id, body=request)


def chat(agent_id: Id, message: str, *, idempotency_key: str | None = None) -> Flow[Turn]:
    """One turn of the agent: its `reply`, its `events`, its `usage`. Sent with an Idempotency-Key (one made here
    unless given), so that a retry, by this client or by you with the same key, never runs the turn twice."""
    key = idempotency_key or uuid.uuid4().hex
    turn = yield from CHAT.call(agent_id=agent_id, body=ChatRequest(message=message), headers={"Idempotency-Key": key})
    if turn.status == "running":  # a retry that found the turn still running: its state so far
        turn = yield from wait(agent_id, turn.turn_id)
    return turn


def chat_stream(agent_id: Id, message: str, *, idempotency_key: str | None = None, deltas: bool = True) -> EventStream[Event]:
    """One turn of the agent, its events as they happen: the reply in `message_delta` pieces while the LLM writes
    it (`deltas=False`: none), each whole `message`, and `turn_completed` last."""
    key = idempotency_key or uuid.uuid4().hex
    request = CHAT_STREAM.request(
        agent_id=agent_id, body=ChatRequest(message=message), query=ChatQuery(deltas=deltas), headers={"Idempotency-Key": key}
    )
    return EventStream(opened(request), EVENT.validate_json)


def memory_pass(agent_id: Id) -> Flow[MemoryPass]:
    """Start a memory pass (or find the one running): the agent's model goes over what was said since its last."""
    return MEMORY_PASS.call(agent_id=agent_id)


def get(agent_id: Id, turn_id: Id) -> Flow[Turn]:
    """A turn or memory pass, finished or running, with its events so far."""
    return GET_TURN.call(agent_id=agent_id, turn_id=turn_id)


def wait(agent_id: Id, turn_id: Id, *, poll_interval: float = 0.5) -> Flow[Turn]:
    """The turn or memory pass once it has ended."""
    while (turn := (yield from GET_TURN.call(agent_id=agent_id, turn_id=turn_id))).status == "running":
        yield Pause(poll_interval)
    return turn


class Turns(Resource[M]):
    get = endpoint(get)
    wait = endpoint(wait)
