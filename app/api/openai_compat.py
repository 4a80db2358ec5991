"""OpenAI-compatible chat: an OpenAI client gets an assistant with long-term memory by changing its base URL to
Engram's `/v1` and naming an agent (id or name) as its `model`.

The request's last message, a user message, becomes the turn's message; the earlier ones are the client's own view
of the conversation and are not stored again (the agent remembers the conversation itself). The agent's own system
prompt, memory and model apply: sampling parameters (`temperature`, `max_tokens`, …) are accepted and ignored.
The reply is what the agent said with `send_message`; `stream: true` streams it as `chat.completion.chunk` events
while the LLM writes it.
Errors on these routes come in OpenAI's shape (app/errors.py), so the SDKs raise their usual exceptions."""

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Request
from pydantic import BaseModel, ConfigDict, Field

from app.agents.models import Agent
from app.agents.service import find_agent_by_reference, tenant_agents
from app.api import sse
from app.api.chat import StreamsDep, unless_llm_failed
from app.api.deps import MeterDep, SessionDep, TenantDep
from app.api.errors import openai_error
from app.chat.events import ErrorEvent, Event, MessageDelta, MessageEvent, ReplyPieces, StopReason, TurnCompleted
from app.chat.schemas import MAX_MESSAGE_CHARS, ChatResponse
from app.delivery.stream import chained
from app.errors import Unprocessable
from app.request_body import StorableBody
from app.runtime import runtime

router = APIRouter(prefix="/v1", tags=["openai"])

# How a turn's stop reads to an OpenAI client.
FINISH_REASON: dict[StopReason, str] = {
    "end_turn": "stop",
    "max_steps": "length",
    "invalid_output": "stop",
    "cancelled": "stop",
    "interrupted": "stop",
    "llm_error": "stop",
}


class ContentPart(StorableBody):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatCompletionMessage(StorableBody):
    model_config = ConfigDict(extra="allow")  # name, tool_calls, …: the client's view, not re-stored
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content if part.type == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionRequest(StorableBody):
    model_config = ConfigDict(extra="allow")  # sampling parameters: accepted, the agent's own settings apply
    model: str = Field(min_length=1, max_length=200, description="the agent's id or name")
    messages: list[ChatCompletionMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None

    def turn_message(self) -> str:
        last = self.messages[-1]
        if last.role != "user":
            raise Unprocessable(f"the last message must be the user's (got role {last.role!r})")
        message = last.text().strip()
        if not message:
            raise Unprocessable("the last user message has no text")
        if len(message) > MAX_MESSAGE_CHARS:
            raise Unprocessable(f"the last user message is over {MAX_MESSAGE_CHARS} characters")
        return message


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    engram_turn_id: uuid.UUID = Field(description="the turn in Engram (GET /v1/agents/{id}/turns/{turn_id})")


class ModelCard(BaseModel):
    id: str = Field(description="the agent's id: usable as `model`, as is its name")
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "engram"
    name: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


OPENAI_ERROR = {"description": 'OpenAI\'s error shape: {"error": {"message", "type", "param", "code"}}'}


async def agent_for_model(request: Request, body: ChatCompletionRequest, principal: TenantDep) -> uuid.UUID:
    # A short session of its own: the request must not hold a transaction open while the turn runs.
    async with runtime(request.app).sessions() as session:
        return (await find_agent_by_reference(session, body.model, tenant_id=principal.tenant_id)).id


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={
        200: {"content": sse.OPENAPI_CONTENT, "description": "stream: chunks"},
        **{status: OPENAI_ERROR for status in (400, 401, 404, 409, 413, 415, 429, 502, 503)},
    },
)
async def chat_completions(
    body: ChatCompletionRequest,
    agent_id: Annotated[uuid.UUID, Depends(agent_for_model)],
    streams: StreamsDep,
    meter: MeterDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Any:
    """One turn of the agent named by `model`, answered as an OpenAI chat completion."""
    events = streams.follow(agent_id, body.turn_message(), idempotency_key, meter, deltas=body.stream)
    first = await anext(events)  # a refused turn (busy agent, no LLM) raises here, as an HTTP error
    assert first.turn_id is not None
    completion_id, created = f"chatcmpl-{first.turn_id.hex}", int(time.time())
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = _chunks(completion_id, created, body.model, first, events, include_usage)
        return sse.event_stream(chunks, _failure, about=f"streamed chat completion {completion_id}", last=sse.DONE)
    turn = unless_llm_failed(ChatResponse.of(first.turn_id, [first] + [event async for event in events]))
    return ChatCompletion(
        id=completion_id,
        created=created,
        model=body.model,
        choices=[Choice(message=AssistantMessage(content=turn.reply), finish_reason=_finish(turn.stop_reason))],
        usage=_usage(turn.usage.prompt_tokens, turn.usage.completion_tokens),
        engram_turn_id=turn.turn_id,
    )


@router.get("/models", responses={401: OPENAI_ERROR})
async def list_models(session: SessionDep, principal: TenantDep) -> ModelList:
    """The caller's agents, as OpenAI models."""
    return ModelList(data=[_card(agent) for agent in await tenant_agents(session, principal.tenant_id)])


def _card(agent: Agent) -> ModelCard:
    return ModelCard(id=str(agent.id), created=int(agent.created_at.timestamp()), name=agent.name)


def _finish(stop: StopReason | None) -> str:
    return FINISH_REASON[stop] if stop else "stop"


def _usage(prompt: int, completion: int) -> CompletionUsage:
    return CompletionUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


async def _chunks(
    completion_id: str, created: int, model: str, first: Event, rest: AsyncIterator[Event], include_usage: bool
) -> AsyncIterator[bytes]:
    """The turn as `chat.completion.chunk` events: the role, a chunk for each piece of the reply as the LLM writes
    it (messages apart by a blank line), the finish reason, the usage when asked for (then `[DONE]`)."""

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else []
        payload = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
        return sse.frame(_json(payload | {"choices": choices} | extra))

    yield chunk({"role": "assistant", "content": ""})
    reply, said = ReplyPieces(), 0
    async for event in chained(first, rest):
        if isinstance(event, MessageDelta | MessageEvent):
            begins, text = reply.piece(event)
            if text:
                yield chunk({"content": ("\n\n" if begins and said else "") + text})
            said += begins
        elif isinstance(event, ErrorEvent) and event.code == "llm_error":
            yield sse.frame(_json(openai_error(502, event.code, event.detail)))
        elif isinstance(event, TurnCompleted):
            yield chunk({}, _finish(event.stop_reason))
            if include_usage:
                usage = _usage(event.usage.prompt_tokens, event.usage.completion_tokens).model_dump()
                yield chunk(None, usage=usage)  # OpenAI's usage chunk has no choices


def _failure(exc: Exception) -> bytes:
    """A failure mid-stream is an OpenAI error object, as OpenAI sends."""
    return sse.frame(_json(openai_error(500, "turn_failed", f"the turn stopped: {type(exc).__name__}")))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
