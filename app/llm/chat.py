"""The chat model: any OpenAI-compatible /v1/chat/completions endpoint, with native tool calling."""

import json
from dataclasses import dataclass, field
from typing import Any

from openai import APIError, APITimeoutError, AsyncOpenAI, OpenAIError

from app.settings import Settings


class LLMError(RuntimeError):
    pass


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


class ChatLLM:
    def __init__(self, settings: Settings):
        self.default_model = settings.default_llm_model
        self.temperature = settings.llm_temperature
        self._client = AsyncOpenAI(
            base_url=settings.openai_base_url,
            # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
            api_key=settings.openai_api_key or "unused",
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], model: str | None) -> Completion:
        kwargs: dict[str, Any] = {"model": model or self.default_model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        try:
            response = await self._client.chat.completions.create(**kwargs)
        except APITimeoutError as exc:
            raise LLMError(f"the LLM did not answer in time: {exc}") from exc
        except APIError as exc:
            raise LLMError(f"the LLM endpoint failed: {exc}") from exc
        except OpenAIError as exc:
            raise LLMError(f"the LLM call failed: {exc}") from exc
        if not response.choices:
            raise LLMError("the LLM answered with no choices")
        message = response.choices[0].message
        extra = message.model_extra or {}
        calls = [
            ToolCall(id=c.id or f"call_{i}", name=c.function.name, arguments=c.function.arguments or "{}")
            for i, c in enumerate(message.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        usage = response.usage
        return Completion(
            content=message.content or "",
            tool_calls=calls,
            reasoning=str(extra.get("reasoning_content") or extra.get("reasoning") or ""),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )


def decode_arguments(raw: str) -> dict[str, Any]:
    """Arguments of a native tool call; ValueError with a message the model can act on."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object") from None
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value
