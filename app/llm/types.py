"""What a chat model is asked (a CompletionRequest) and what it answers (a Completion)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it


@dataclass
class Completion:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""  # reasoning_content of thinking models (vLLM, llama.cpp, DeepSeek…)
    prompt_tokens: int = 0
    completion_tokens: int = 0


# Told of a tool call each time its arguments have grown: the call so far (its arguments: partial JSON).
CallProgress = Callable[[ToolCall], None]


@dataclass(frozen=True)
class CompletionRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]  # none offered: a plain-text answer (a summary)
    model: str | None  # the agent's; None: the endpoint's default
    budget_seconds: float | None = None  # bounds the call, retries included
    # Told of each tool call as its arguments grow, while the model writes them (a model that answers only whole may
    # never tell it).
    on_progress: CallProgress | None = None
