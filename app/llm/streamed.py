"""A chat completion asked for as a stream: its chunks put back together into the Completion the whole answer would
have been, each tool call handed on as its arguments grow (the chat layer reads the reply out of `send_message`'s
while the model writes it)."""

from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletionChunk

from app.llm.tokens import estimate_tokens, json_tokens, message_tokens
from app.llm.types import CallProgress, Completion, ToolCall


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamedCompletion:
    def __init__(self, on_progress: CallProgress):
        self._on_progress = on_progress
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._usage: tuple[int, int] | None = None

    def add(self, chunk: ChatCompletionChunk) -> None:
        if chunk.usage is not None:  # stream_options.include_usage: a last chunk without choices
            self._usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        if not chunk.choices:
            return
        delta = chunk.choices[0].delta
        if delta.content:
            self._content.append(delta.content)
        extra = delta.model_extra or {}
        if thought := extra.get("reasoning_content") or extra.get("reasoning"):
            self._reasoning.append(str(thought))
        for position, piece in enumerate(delta.tool_calls or []):
            # Gemini's OpenAI-compatible stream sends each call whole and, at times, without an index.
            index = piece.index if piece.index is not None else position
            call = self._calls.setdefault(index, _Call())
            call.id = call.id or piece.id or ""
            function = piece.function
            if function is None:
                continue
            call.name = call.name or function.name or ""
            if function.arguments:
                call.arguments.append(function.arguments)
                self._on_progress(ToolCall(id=call.id or f"call_{index}", name=call.name, arguments="".join(call.arguments)))

    def completion(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        """The whole answer. An endpoint that sent no usage (one that ignores `stream_options`) is counted by the
        offline estimate, so that its turns still count against token quotas."""
        calls = [
            ToolCall(id=c.id or f"call_{i}", name=c.name, arguments="".join(c.arguments) or "{}")
            for i, c in sorted(self._calls.items())
            if c.name
        ]
        content, reasoning = "".join(self._content), "".join(self._reasoning)
        if self._usage is None:
            written = estimate_tokens(content) + estimate_tokens(reasoning) + sum(estimate_tokens(c.arguments) for c in calls)
            self._usage = (sum(map(message_tokens, messages)) + (json_tokens(tools) if tools else 0), written)
        return Completion(
            content=content,
            tool_calls=calls,
            reasoning=reasoning,
            prompt_tokens=self._usage[0],
            completion_tokens=self._usage[1],
        )
