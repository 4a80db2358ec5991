"""Typed turn events, shared by the POST response, SSE, the WebSocket and turn replay."""

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

StopReason = Literal["end_turn", "max_steps", "llm_error", "invalid_output", "cancelled", "interrupted"]
TurnStatus = Literal["running", "completed", "interrupted", "cancelled"]


def turn_status(stop: StopReason | None) -> TurnStatus:
    """A turn's status follows from how it stopped (None: it has not)."""
    if stop is None:
        return "running"
    return "cancelled" if stop == "cancelled" else "interrupted" if stop == "interrupted" else "completed"


class Usage(BaseModel):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Event(BaseModel):
    agent_id: uuid.UUID
    turn_id: uuid.UUID
    seq: int


class TurnStarted(_Event):
    type: Literal["turn_started"] = "turn_started"
    message: str  # the user's message; a memory pass: what it goes over
    kind: Literal["chat", "memory_pass"] = "chat"
    # Set when the turn is answered by the packaged demo model (no LLM configured): its replies are not reliable.
    demo_model: str | None = None


class Reasoning(_Event):
    type: Literal["reasoning"] = "reasoning"
    step: int
    text: str


class ToolCallEvent(_Event):
    type: Literal["tool_call"] = "tool_call"
    step: int
    call_id: str
    name: str
    arguments: dict[str, Any]


class ToolResultEvent(_Event):
    type: Literal["tool_result"] = "tool_result"
    step: int
    call_id: str
    name: str
    ok: bool
    result: str


class MessageEvent(_Event):
    type: Literal["message"] = "message"
    step: int
    text: str


class TurnCompleted(_Event):
    type: Literal["turn_completed"] = "turn_completed"
    stop_reason: StopReason
    reply: str
    usage: Usage


class ErrorEvent(BaseModel):
    # _Event's fields, in its order, but turn_id may be None: an error outside a turn (a bad WebSocket frame).
    agent_id: uuid.UUID
    turn_id: uuid.UUID | None
    seq: int
    type: Literal["error"] = "error"
    code: str
    detail: str


Event = Annotated[
    TurnStarted | Reasoning | ToolCallEvent | ToolResultEvent | MessageEvent | TurnCompleted | ErrorEvent,
    Field(discriminator="type"),
]
event_adapter: TypeAdapter[Event] = TypeAdapter(Event)
