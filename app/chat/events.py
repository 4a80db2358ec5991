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


class MessageDelta(_Event):
    """The next piece of a `send_message` text while the LLM writes it. Live only: watchers that ask for deltas get
    them from the replica that runs the turn; the turn's store and replay keep the final `message`. Deltas are
    provisional: a call that fails (a broken stream, an invalid call) sends no `message` after them."""

    type: Literal["message_delta"] = "message_delta"
    step: int
    call_id: str  # the send_message call it belongs to: a step may send more than one message
    text: str


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
    TurnStarted | Reasoning | ToolCallEvent | ToolResultEvent | MessageDelta | MessageEvent | TurnCompleted | ErrorEvent,
    Field(discriminator="type"),
]
event_adapter: TypeAdapter[Event] = TypeAdapter(Event)


class ReplyPieces:
    """A reply as a client shows it growing, from a turn's events: each delta as it comes, then of each `message`
    only what its deltas did not show already (all of it when none came: an answer that was not streamed)."""

    def __init__(self) -> None:
        self._streamed: dict[str, str] = {}  # call_id -> text shown so far
        self._waiting: dict[int, list[str]] = {}  # step -> its calls with deltas, in the order they began

    def piece(self, event: MessageDelta | MessageEvent) -> tuple[bool, str]:
        """(whether this piece begins a message, its text)."""
        if isinstance(event, MessageDelta):
            begins = event.call_id not in self._streamed
            if begins:
                self._waiting.setdefault(event.step, []).append(event.call_id)
            self._streamed[event.call_id] = self._streamed.get(event.call_id, "") + event.text
            return begins, event.text
        waiting = self._waiting.get(event.step)
        if not waiting:
            return True, event.text
        shown = self._streamed.pop(waiting.pop(0))
        return False, event.text[len(shown) :] if event.text.startswith(shown) else ""
