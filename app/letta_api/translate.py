"""Engram's turns and messages as Letta's typed messages. A running turn's events become them as they come (for
`messages.create` and the stream); a stored message becomes them when the conversation is listed. As in Letta, what
the agent says through send_message is an assistant_message (its tool call and return are not shown), unless the
request asks for `use_assistant_message: false`."""

import json
import uuid
from collections.abc import Collection
from typing import Any, Literal

from app.chat.events import (
    Event,
    MessageDelta,
    MessageEvent,
    Reasoning,
    ReplyPieces,
    StopReason,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)
from app.chat.tools import REPLY_TOOL
from app.letta_api.common import letta_id
from app.letta_api.letta_messages import (
    LettaAssistantMessage,
    LettaMessage,
    LettaReasoningMessage,
    LettaSystemMessage,
    LettaToolCall,
    LettaToolCallMessage,
    LettaToolReturnMessage,
    LettaUsageStatistics,
    LettaUserMessage,
    StopReasonType,
)
from app.memory.models import Message
from app.models_base import utcnow

STEP_NAMESPACE = uuid.UUID("0b7c55e2-91a4-4d4e-8f3b-2a6f0d9c1e47")  # a turn's steps' stable Letta ids
STOP_REASONS: dict[StopReason, StopReasonType] = {
    "end_turn": "end_turn",
    "max_steps": "max_steps",
    "llm_error": "llm_api_error",
    "invalid_output": "invalid_llm_response",
    "cancelled": "cancelled",
    "interrupted": "error",
}


def run_id(turn_id: uuid.UUID) -> str:
    """A turn is what Letta calls a run."""
    return letta_id("run", turn_id)


class TurnMessages:
    """Letta's messages of one turn, from its events in order. A step's reasoning, tool calls and reply share the
    step's id (one message in Letta's terms); each tool return has its own."""

    def __init__(self, *, use_assistant_message: bool = True, include: Collection[str] | None = None, tokens: bool = False):
        """`tokens`: the reply as it is written (Letta's `stream_tokens`): an assistant_message for each piece, all
        of a message's pieces under its id, as Letta streams them."""
        self.use_assistant_message = use_assistant_message
        self.include = set(include) if include is not None else None
        self.reply = ReplyPieces() if tokens else None

    def of(self, event: Event) -> list[LettaMessage]:
        return [m for m in self._translated(event) if self.include is None or m.message_type in self.include]

    def _translated(self, event: Event) -> list[LettaMessage]:
        hide_send = self.use_assistant_message
        if isinstance(event, Reasoning):
            return [LettaReasoningMessage(reasoning=event.text, **self._step(event.turn_id, event.step))]
        if isinstance(event, ToolCallEvent) and not (hide_send and event.name == REPLY_TOOL):
            call = LettaToolCall(name=event.name, arguments=_arguments(event.arguments), tool_call_id=event.call_id)
            return [LettaToolCallMessage(tool_call=call, tool_calls=[call], **self._step(event.turn_id, event.step))]
        if isinstance(event, ToolResultEvent) and not (hide_send and event.name == REPLY_TOOL):
            return [
                LettaToolReturnMessage(
                    tool_return=event.result,
                    status="success" if event.ok else "error",
                    tool_call_id=event.call_id,
                    name=event.name,
                    **self._step(event.turn_id, event.step, event.call_id),
                )
            ]
        if isinstance(event, MessageDelta | MessageEvent) and hide_send and self.reply is not None:
            _, text = self.reply.piece(event)
            return [LettaAssistantMessage(content=text, **self._step(event.turn_id, event.step))] if text else []
        if isinstance(event, MessageEvent) and hide_send:
            return [LettaAssistantMessage(content=event.text, **self._step(event.turn_id, event.step))]
        return []

    @staticmethod
    def _step(turn_id: uuid.UUID, step: int, call_id: str | None = None) -> dict[str, Any]:
        step_uuid = uuid.uuid5(STEP_NAMESPACE, f"{turn_id}/{step}")
        message_uuid = uuid.uuid5(STEP_NAMESPACE, f"{turn_id}/{call_id}") if call_id else step_uuid
        return {
            "id": letta_id("message", message_uuid),
            "date": utcnow(),
            "run_id": run_id(turn_id),
            "step_id": letta_id("step", step_uuid),
        }


def usage_of(turn_id: uuid.UUID, usage: Usage) -> LettaUsageStatistics:
    return LettaUsageStatistics(
        completion_tokens=usage.completion_tokens,
        prompt_tokens=usage.prompt_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
        step_count=usage.llm_calls,
        run_ids=[run_id(turn_id)],
    )


def stored_messages(message: Message, *, use_assistant_message: bool = True) -> list[LettaMessage]:
    """A message of the conversation as Letta lists it: all of its parts carry the stored message's id."""
    common: dict[str, Any] = {
        "id": letta_id("message", message.id),
        "date": message.occurred_at,
        "run_id": run_id(message.turn_id) if message.turn_id else None,
    }
    if message.role == "user":
        return [LettaUserMessage(content=message.content, **common)]
    if message.role == "system":
        return [LettaSystemMessage(content=message.content, **common)]
    if message.role == "tool":
        if use_assistant_message and message.name == REPLY_TOOL:
            return []
        status: Literal["success", "error"] = "error" if message.content.startswith("Error") else "success"
        return [
            LettaToolReturnMessage(
                tool_return=message.content,
                status=status,
                tool_call_id=message.tool_call_id or "",
                name=message.name,
                **common,
            )
        ]
    if message.handed_in:  # what another LLM's assistant said to the user: no monologue, no tools
        return [LettaAssistantMessage(content=message.content, **common)]
    parts: list[LettaMessage] = [LettaReasoningMessage(reasoning=message.content, **common)] if message.content else []
    for call in message.tool_calls or []:
        name, arguments = str(call.get("name", "")), str(call.get("arguments", ""))
        if use_assistant_message and name == REPLY_TOOL:
            parts.append(LettaAssistantMessage(content=_sent_text(arguments), **common))
        else:
            tool_call = LettaToolCall(name=name, arguments=arguments, tool_call_id=str(call.get("id", "")))
            parts.append(LettaToolCallMessage(tool_call=tool_call, tool_calls=[tool_call], **common))
    return parts


def _arguments(arguments: dict[str, Any]) -> str:
    """A call's arguments as the model wrote them: JSON text (kept raw when it was not valid JSON)."""
    if set(arguments) == {"_raw"} and isinstance(arguments["_raw"], str):
        return arguments["_raw"]
    return json.dumps(arguments, ensure_ascii=False)


def _sent_text(arguments: str) -> str:
    try:
        decoded = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    return str(decoded.get("text", "")) if isinstance(decoded, dict) else arguments
