"""Letta's typed messages (`message_type`: reasoning_message, tool_call_message, tool_return_message,
assistant_message, user_message, system_message), the stream's closing items (stop_reason, usage_statistics,
error_message), and the request that sends a turn."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from app.chat.schemas import ChatRequest
from app.errors import Unprocessable
from app.letta_api.common import engram_request
from app.letta_api.schemas import LettaRequest

MessageType = Literal[
    "system_message",
    "user_message",
    "assistant_message",
    "reasoning_message",
    "hidden_reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "approval_request_message",
    "approval_response_message",
    "summary_message",
    "event_message",
]


class _LettaMessage(BaseModel):
    id: str
    date: datetime
    name: str | None = None
    otid: str | None = None
    run_id: str | None = None
    step_id: str | None = None


class LettaSystemMessage(_LettaMessage):
    message_type: Literal["system_message"] = "system_message"
    content: str


class LettaUserMessage(_LettaMessage):
    message_type: Literal["user_message"] = "user_message"
    content: str


class LettaReasoningMessage(_LettaMessage):
    message_type: Literal["reasoning_message"] = "reasoning_message"
    reasoning: str
    source: Literal["reasoner_model", "non_reasoner_model"] = "non_reasoner_model"


class LettaToolCall(BaseModel):
    name: str
    arguments: str
    tool_call_id: str


class LettaToolCallMessage(_LettaMessage):
    message_type: Literal["tool_call_message"] = "tool_call_message"
    tool_call: LettaToolCall
    tool_calls: list[LettaToolCall]


class LettaToolReturnMessage(_LettaMessage):
    message_type: Literal["tool_return_message"] = "tool_return_message"
    tool_return: str
    status: Literal["success", "error"]
    tool_call_id: str
    stdout: list[str] | None = None
    stderr: list[str] | None = None


class LettaAssistantMessage(_LettaMessage):
    message_type: Literal["assistant_message"] = "assistant_message"
    content: str


LettaMessage = Annotated[
    LettaSystemMessage
    | LettaUserMessage
    | LettaReasoningMessage
    | LettaToolCallMessage
    | LettaToolReturnMessage
    | LettaAssistantMessage,
    Field(discriminator="message_type"),
]

StopReasonType = Literal["end_turn", "error", "llm_api_error", "invalid_llm_response", "max_steps", "cancelled"]


class LettaStopReason(BaseModel):
    message_type: Literal["stop_reason"] = "stop_reason"
    stop_reason: StopReasonType


class LettaUsageStatistics(BaseModel):
    message_type: Literal["usage_statistics"] = "usage_statistics"
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int
    step_count: int
    run_ids: list[str]


class LettaErrorMessage(BaseModel):
    message_type: Literal["error_message"] = "error_message"
    run_id: str
    error_type: str
    message: str
    detail: str | None = None


class LettaResponse(BaseModel):
    messages: list[LettaMessage]
    stop_reason: LettaStopReason
    usage: LettaUsageStatistics


class LettaContentPart(BaseModel):
    type: str
    text: str | None = None


class LettaMessageCreate(LettaRequest):
    role: Literal["user", "system", "assistant"] = "user"
    content: str | list[LettaContentPart]
    type: Literal["message"] | None = None


class LettaMessageRequest(LettaRequest):
    """A turn's input: Letta's `messages` (user messages) or its newer `input`. `stream_tokens` streams the reply as
    the LLM writes it; `max_steps`, `include_pings`, `background`, `override_model` and Letta's other options are
    accepted and ignored."""

    messages: list[LettaMessageCreate] | None = Field(default=None, max_length=50)
    input: str | list[LettaContentPart] | None = None
    use_assistant_message: bool = True
    include_return_message_types: list[MessageType] | None = None
    streaming: bool = False
    stream_tokens: bool = False

    def turn_message(self) -> str:
        """The user's text, every message of it joined: Engram's turn takes one message."""
        parts: list[str] = []
        if self.input is not None:
            parts.append(_text(self.input))
        for message in self.messages or []:
            if message.role != "user":
                raise Unprocessable(f"only user messages start a turn (got role {message.role!r}): Engram keeps its own prompt")
            parts.append(_text(message.content))
        text = "\n\n".join(p for p in parts if p.strip())
        if not text:
            raise Unprocessable("send a user message with some text (`messages` or `input`)")
        return engram_request(ChatRequest, {"message": text}).message  # Engram's rules for a turn's message


def _text(content: str | list[LettaContentPart]) -> str:
    if isinstance(content, str):
        return content
    kinds = {part.type for part in content} - {"text"}
    if kinds:
        raise Unprocessable(f"only text content is supported (got {', '.join(sorted(kinds))})")
    return "\n".join(part.text or "" for part in content)
