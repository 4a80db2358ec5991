"""What a chat model answers: text, tool calls, reasoning and the tokens it took."""

from dataclasses import dataclass, field


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
