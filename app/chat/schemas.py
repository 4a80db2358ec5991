import uuid
from typing import Literal

from pydantic import BaseModel, Field

from app.chat.events import Event, StopReason, Usage
from app.memory.schemas import MessageRead
from app.request_body import RequestBody

MAX_MESSAGE_CHARS = 32_000


class ChatRequest(RequestBody):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class ChatResponse(BaseModel):
    turn_id: uuid.UUID
    status: Literal["running", "completed", "interrupted", "cancelled"]
    reply: str
    stop_reason: StopReason | None
    events: list[Event]
    usage: Usage


class WsChat(RequestBody):
    type: Literal["chat"]
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    idempotency_key: str | None = Field(default=None, max_length=200)


class ContextTokensRead(BaseModel):
    system: int = Field(description="system prompt: instructions, core memory, summary")
    tools: int = Field(description="tool schemas")
    messages: int = Field(description="messages in context")
    total: int
    window: int = Field(description="the token budget of this agent's model")
    warn_at: int = Field(description="above this the agent gets a memory-pressure notice")
    evict_at: int = Field(description="above this the oldest turns are summarised out of the context")


class ContextRead(BaseModel):
    system_prompt: str
    summary: str | None
    messages: list[MessageRead]
    messages_out_of_context: int = Field(description="older messages, now only in recall memory")
    tokens: ContextTokensRead
