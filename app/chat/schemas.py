import uuid
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from app.chat.events import ErrorEvent, Event, StopReason, TurnCompleted, TurnStatus, Usage, turn_status
from app.memory.schemas import MessageRead
from app.request_body import RequestBody

MAX_MESSAGE_CHARS = 32_000


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the message is blank: send some text")
    return text


# What a user says in a turn: a blank message would run a whole LLM turn about nothing.
UserMessage = Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS), AfterValidator(_not_blank)]


class ChatRequest(RequestBody):
    message: UserMessage


class ChatResponse(BaseModel):
    turn_id: uuid.UUID
    status: TurnStatus
    reply: str
    stop_reason: StopReason | None
    events: list[Event]
    usage: Usage

    @classmethod
    def of(cls, turn_id: uuid.UUID, events: list[Event]) -> "ChatResponse":
        """A turn as its events tell it; `turn_completed` (always the last event of a finished turn) has the outcome."""
        done = events[-1] if events and isinstance(events[-1], TurnCompleted) else None
        return cls(
            turn_id=turn_id,
            status=turn_status(done.stop_reason if done else None),
            reply=done.reply if done else "",
            stop_reason=done.stop_reason if done else None,
            events=events,
            usage=done.usage if done else Usage(),
        )

    @property
    def llm_failure(self) -> str | None:
        """What the LLM failure that ended the turn said (None: it did not end on one)."""
        if self.stop_reason != "llm_error":
            return None
        return next((e.detail for e in self.events if isinstance(e, ErrorEvent)), "the LLM failed")


class WsChat(RequestBody):
    type: Literal["chat"]
    message: UserMessage
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
