"""The chat model: any OpenAI-compatible /v1/chat/completions endpoint, with native tool calling."""

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from openai import (
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    OpenAIError,
    RateLimitError,
)
from openai.types.chat import ChatCompletion

from app.errors import LLMError
from app.metrics import LLM_ERRORS, LLM_SECONDS
from app.settings import Settings


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


class ChatModel(Protocol):
    """What the agent loop needs of a chat model: ChatLLM (an endpoint) or LocalLLM (app/llm/local.py)."""

    default_model: str
    # The name of a demo model (the packaged offline one: too small to remember reliably), None for a real one.
    demo_model: str | None

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        model: str | None,
        *,
        budget_seconds: float | None = None,
    ) -> Completion: ...


class ChatLLM:
    demo_model: str | None = None

    def __init__(self, settings: Settings):
        self.default_model = settings.default_llm_model
        self.temperature = settings.llm_temperature
        self._client = AsyncOpenAI(
            base_url=settings.llm_base_url,
            # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
            api_key=settings.openai_api_key or "unused",
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        model: str | None,
        *,
        budget_seconds: float | None = None,
    ) -> Completion:
        """One chat completion. The SDK retries timeouts, 429 and 5xx with exponential backoff and jitter
        (ENGRAM_LLM_MAX_RETRIES); budget_seconds bounds the call, retries included."""
        kwargs: dict[str, Any] = {"model": model or self.default_model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        started = time.perf_counter()
        try:
            async with asyncio.timeout(budget_seconds):
                # Not chat.completions.create(): it walks the request through the SDK's TypedDict transform, ~160 ms
                # of event-loop time for a 900-message context (measured); Engram's request is plain JSON already.
                response = await self._client.post("/chat/completions", body=kwargs, cast_to=ChatCompletion)
        except (APITimeoutError, TimeoutError) as exc:
            raise _failed("timeout", f"the LLM did not answer in time ({type(exc).__name__})", started) from exc
        except RateLimitError as exc:
            raise _failed("rate_limited", f"the LLM endpoint kept rate-limiting: {exc}", started) from exc
        except APIStatusError as exc:
            raise _failed(f"http_{exc.status_code}", f"the LLM endpoint failed: {exc}", started) from exc
        except OpenAIError as exc:
            raise _failed("connection", f"the LLM call failed: {exc}", started) from exc
        LLM_SECONDS.labels("ok").observe(time.perf_counter() - started)
        if not response.choices:
            raise LLMError("the LLM answered with no choices")
        message = response.choices[0].message
        extra = message.model_extra or {}
        calls = [
            ToolCall(id=c.id or f"call_{i}", name=function.name, arguments=function.arguments or "{}")
            for i, c in enumerate(message.tool_calls or [])
            if (function := getattr(c, "function", None)) is not None  # a custom tool call has none
        ]
        usage = response.usage
        return Completion(
            content=message.content or "",
            tool_calls=calls,
            reasoning=str(extra.get("reasoning_content") or extra.get("reasoning") or ""),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )


def _failed(kind: str, detail: str, started: float) -> LLMError:
    LLM_SECONDS.labels("error").observe(time.perf_counter() - started)
    LLM_ERRORS.labels(kind).inc()
    return LLMError(detail)


def decode_arguments(raw: str) -> dict[str, Any]:
    """Arguments of a native tool call; ValueError with a message the model can act on."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object") from None
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value
