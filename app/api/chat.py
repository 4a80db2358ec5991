import asyncio
import json
import logging
import uuid
from functools import partial
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    Depends,
    Header,
    Query,
    Request,
    WebSocket,
    WebSocketDisconnect,
)
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from app.agents.service import find_agent
from app.api import sse
from app.api.deps import (
    AgentDep,
    AgentIdDep,
    MeterDep,
    SessionDep,
    SettingsDep,
    authenticate_connection,
    connection_key,
    quota_meter,
)
from app.api.errors import ERROR_RESPONSES, TURN_ERROR_RESPONSES
from app.auth.principal import Principal, require_tenant
from app.chat.events import ErrorEvent, Event
from app.chat.schemas import (
    ChatRequest,
    ChatResponse,
    ContextRead,
    WsChat,
)
from app.chat.service import context_read, stored_turn
from app.chat.turn_state import TurnResult
from app.delivery.stream import TurnStreams, chained
from app.errors import EngramError, LLMError, NotFound, Unprocessable, format_validation
from app.quotas.service import Meter
from app.runtime import runtime

log = logging.getLogger("engram.chat")
router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["chat"], responses=ERROR_RESPONSES)
WS_AUTH_TIMEOUT_SECONDS = 10

IdempotencyKey = Annotated[str | None, Header(max_length=200, description="same key → same turn, never run twice")]
Deltas = Annotated[
    bool,
    Query(
        description="stream the reply as the LLM writes it: `message_delta` events before each `message` "
        "(live only: replay has the final `message`); false: the stored events alone"
    ),
]


async def get_turn_streams(request: Request) -> TurnStreams:
    return runtime(request.app).turn_streams


StreamsDep = Annotated[TurnStreams, Depends(get_turn_streams)]


@router.post(
    "/chat",
    response_model=ChatResponse,
    responses={
        200: {
            "description": "The finished turn: the reply, every event in order, token usage. With `Accept: "
            f"{sse.MEDIA_TYPE}`, the same events as server-sent events (`event: <type>`, `data: <json>`)",
            "content": sse.OPENAPI_CONTENT,
        },
        202: {"model": ChatResponse, "description": "Idempotency-Key of a turn that is still running: its state so far"},
        **TURN_ERROR_RESPONSES,
    },
    description=f"Run one turn of the agent loop. With `Accept: {sse.MEDIA_TYPE}` the events stream as server-sent events,"
    "\nthe reply's `message_delta` events among them unless `deltas=false`.",
)
async def chat(
    agent_id: AgentIdDep,
    body: ChatRequest,
    request: Request,
    streams: StreamsDep,
    meter: MeterDep,
    idempotency_key: IdempotencyKey = None,
    deltas: Deltas = True,
) -> Any:
    if sse.accepts_events(request):
        events = streams.follow(agent_id, body.message, idempotency_key, meter, deltas=deltas)
        first = await anext(events)  # a refused turn raises here, as a normal HTTP error
        frames = (_frame(event) async for event in chained(first, events))
        failure = partial(_stopped_frame, first.agent_id)
        return sse.event_stream(frames, failure, about=f"streamed turn of agent {first.agent_id}")
    collected = [event async for event in streams.follow(agent_id, body.message, idempotency_key, meter)]
    turn_id = collected[0].turn_id  # turn_started, or the first event of a replayed turn
    assert turn_id is not None
    response = unless_llm_failed(ChatResponse.of(turn_id, collected))
    return JSONResponse(response.model_dump(mode="json"), status_code=202 if response.status == "running" else 200)


def unless_llm_failed(response: ChatResponse) -> ChatResponse:
    """The turn, or the 502 it is when the LLM failed it (the user's message stays stored with the turn)."""
    if (failure := response.llm_failure) is not None:
        raise LLMError(f"{failure} (your message is saved)", turn_id=response.turn_id)
    return response


def _frame(event: Event) -> bytes:
    return sse.frame(event.model_dump_json(), event=event.type)


def _stopped_frame(agent_id: uuid.UUID, exc: Exception) -> bytes:
    return _frame(_failure_event(agent_id, exc, "the turn stopped"))


@router.get("/turns/{turn_id}")
async def get_turn(agent: AgentDep, turn_id: uuid.UUID, session: SessionDep) -> ChatResponse:
    """A finished or running turn with every event stored so far (replay)."""
    return await stored_turn(session, agent.id, turn_id)


@router.get("/context")
async def get_context(agent: AgentDep, session: SessionDep, settings: SettingsDep) -> ContextRead:
    """What the LLM would see now: the rendered system prompt, the messages in context and their token counts."""
    return await context_read(session, agent, settings)


@router.websocket("/ws")
async def watch(websocket: WebSocket, agent_id: uuid.UUID, deltas: Deltas = True) -> None:
    """Live events of every turn of this agent; send {"type": "chat", "message": ...} to start a turn."""
    await websocket.accept()
    try:
        principal = await _authenticate_socket(websocket)
    except WebSocketDisconnect:
        return  # gone before saying who it is (a console page left at once)
    except EngramError as exc:
        await _send_error(websocket, agent_id, exc.code, exc.detail)
        await websocket.close(code=4000 + exc.status_code)
        return
    state = runtime(websocket.app)
    try:
        async with state.sessions() as session:
            await find_agent(session, agent_id, tenant_id=principal.tenant_id)
    except NotFound as exc:
        await _send_error(websocket, agent_id, exc.code, exc.detail)
        await websocket.close(code=4404)
        return
    streams, settings = state.turn_streams, state.settings
    meter = quota_meter(state, principal)  # a refused turn comes back as an error event (_report_refusal)
    async with streams.watch(agent_id, deltas=deltas) as outbox:
        # One writer: turn events and this socket's own errors all go out through the agent's queue, in order.
        # The socket lives as long as both halves do: a client gone, a bad frame or a stuck reader ends it.
        async with asyncio.TaskGroup() as group:
            forwarding = group.create_task(_forward(websocket, outbox, settings.ws_send_timeout_seconds))
            reading = group.create_task(_read_commands(websocket, outbox, streams, agent_id, settings.max_request_bytes, meter))
            forwarding.add_done_callback(lambda _: reading.cancel())
            reading.add_done_callback(lambda _: forwarding.cancel())
    closing = next((half.result() for half in (reading, forwarding) if not half.cancelled()), None)
    if closing is not None:
        await _close(websocket, *closing, timeout=settings.ws_send_timeout_seconds)


Closing = tuple[int, str]  # a WebSocket close code and its reason (at most 123 bytes)
EXPECTED_COMMAND = 'send {"type": "chat", "message": ...}'


async def _read_commands(
    websocket: WebSocket,
    outbox: asyncio.Queue[Event | None],
    streams: TurnStreams,
    agent_id: uuid.UUID,
    max_bytes: int,
    meter: Meter | None,
) -> Closing | None:
    """Start a turn for each chat command. A frame that is not one gets an error event; a frame that cannot be read
    as text (binary) or is over the request size limit closes the socket (None: the client went away)."""
    while True:
        frame = await websocket.receive()
        if frame["type"] == "websocket.disconnect":
            return None
        raw = frame.get("text")
        if raw is None:
            return 1003, "binary frames are not understood: send JSON text frames"
        if len(raw.encode()) > max_bytes:
            return 1009, f"frame over ENGRAM_MAX_REQUEST_BYTES ({max_bytes} bytes)"
        try:
            command = _chat_command(raw)
        except Unprocessable as exc:
            streams.hub.offer(outbox, _error_event(agent_id, exc.code, exc.detail))
            continue
        task = streams.start(agent_id, command.message, command.idempotency_key, meter)
        task.add_done_callback(lambda t: _report_refusal(t, streams, outbox, agent_id))


def _chat_command(raw: str) -> WsChat:
    """A text frame as a chat command, or Unprocessable saying what is wrong with it and what to send."""
    try:
        frame = json.loads(raw)
    except ValueError as exc:
        raise Unprocessable(f"not valid JSON ({exc}): {EXPECTED_COMMAND}") from None
    if not isinstance(frame, dict):
        raise Unprocessable(f"expected a JSON object: {EXPECTED_COMMAND}")
    if "type" not in frame:
        raise Unprocessable(f'the frame has no "type": {EXPECTED_COMMAND}')
    if frame["type"] != "chat":
        raise Unprocessable(f"unknown message type {frame['type']!r}: {EXPECTED_COMMAND}")
    try:
        return WsChat.model_validate(frame)
    except ValidationError as exc:
        raise Unprocessable(f"{format_validation(exc.errors())}: {EXPECTED_COMMAND}") from None


async def _authenticate_socket(websocket: WebSocket) -> Principal:
    """A key from the handshake headers or, for browsers that cannot set headers, from a first
    {"type": "auth", "api_key": ...} message."""
    key = connection_key(websocket)
    if key is None and await runtime(websocket.app).authenticator.keys_configured():
        try:
            async with asyncio.timeout(WS_AUTH_TIMEOUT_SECONDS):
                first = json.loads(await websocket.receive_text())
            offered = first.get("api_key") if isinstance(first, dict) and first.get("type") == "auth" else None
            key = offered if isinstance(offered, str) else None
        except (TimeoutError, ValueError):
            key = None
    return require_tenant(await authenticate_connection(websocket, key))


async def _forward(websocket: WebSocket, queue: asyncio.Queue[Event | None], send_timeout: float) -> Closing | None:
    """Send the agent's events. A client that takes none for send_timeout seconds is let go without a close frame
    (it would not read one), so that a reader that never reads holds no task and no backlog."""
    while (event := await queue.get()) is not None:
        try:
            async with asyncio.timeout(send_timeout):
                await websocket.send_text(event.model_dump_json())
        except TimeoutError:
            log.warning("let go of a watcher of agent %s that took no event for %gs", event.agent_id, send_timeout)
            return None
        except WebSocketDisconnect:
            return None
    return 1013, "fell too far behind: replay missed turns with GET /v1/agents/{agent_id}/turns/{turn_id}"


async def _close(websocket: WebSocket, code: int, reason: str, *, timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            await websocket.close(code=code, reason=reason)
    except (TimeoutError, RuntimeError, WebSocketDisconnect):
        pass  # the client is gone or not reading: there is no one to tell


def _report_refusal(
    task: asyncio.Task[TurnResult], streams: TurnStreams, outbox: asyncio.Queue[Event | None], agent_id: uuid.UUID
) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        streams.hub.offer(outbox, _failure_event(agent_id, exc, "the turn could not run"))


def _failure_event(agent_id: uuid.UUID, exc: BaseException, unexpected: str) -> ErrorEvent:
    """A failed turn as an event: an EngramError says what it is; anything else is `turn_failed`."""
    if isinstance(exc, EngramError):
        return _error_event(agent_id, exc.code, exc.detail)
    return _error_event(agent_id, "turn_failed", f"{unexpected}: {type(exc).__name__}")


def _error_event(agent_id: uuid.UUID, code: str, detail: str) -> ErrorEvent:
    return ErrorEvent(agent_id=agent_id, turn_id=None, seq=0, code=code, detail=detail)


async def _send_error(websocket: WebSocket, agent_id: uuid.UUID, code: str, detail: str) -> None:
    """For the handshake, before the socket has an outbox."""
    try:
        await websocket.send_text(_error_event(agent_id, code, detail).model_dump_json())
    except (RuntimeError, WebSocketDisconnect):
        pass
