"""A chat turn and its events, as `chat()` returns them, `chat_stream()` yields them and `turns.get()` replays them:
one JSON object each, told apart by `type` (the server's app/chat/events.py; docs/api.md, Events)."""

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field, TypeAdapter

StopReason = Literal["end_turn", "max_steps", "llm_error", "invalid_output", "cancelled", "interrupted"]


class Usage(BaseModel):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Event(BaseModel):
    agent_id: UUID
    turn_id: UUID
    seq: int


class TurnStarted(_Event):
    type: Literal["turn_started"] = "turn_started"
    message: str  # the user's message; a memory pass: what it goes over
    kind: Literal["chat", "memory_pass"] = "chat"
    demo_model: str | None = None  # set when the packaged demo model answers: its replies are not reliable


class Reasoning(_Event):
    type: Literal["reasoning"] = "reasoning"
    step: int
    text: str  # inner monologue: never part of the reply


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


class MessageDelta(_Event):
    """The next piece of a reply while the LLM writes it (streams only; provisional until its `message`)."""

    type: Literal["message_delta"] = "message_delta"
    step: int
    call_id: str
    text: str


class MessageEvent(_Event):
    """What the agent said to the user (a whole `send_message`)."""

    type: Literal["message"] = "message"
    step: int
    text: str


class TurnCompleted(_Event):
    type: Literal["turn_completed"] = "turn_completed"
    stop_reason: StopReason
    reply: str
    usage: Usage


class ErrorEvent(BaseModel):
    agent_id: UUID
    turn_id: UUID | None  # None: an error outside a turn
    seq: int
    type: Literal["error"] = "error"
    code: str
    detail: str


Event = Annotated[
    TurnStarted | Reasoning | ToolCallEvent | ToolResultEvent | MessageDelta | MessageEvent | TurnCompleted | ErrorEvent,
    Field(discriminator="type"),
]
EVENT: TypeAdapter[Event] = TypeAdapter(Event)


class Turn(BaseModel):
    """A chat turn (or a memory pass): its reply, every event in order, its token usage."""

    turn_id: UUID
    status: Literal["running", "completed", "interrupted", "cancelled"]
    reply: str
    stop_reason: StopReason | None
    events: list[Event]
    usage: Usage
