"""The chat model: any OpenAI-compatible /v1/chat/completions endpoint, with native tool calling."""

import asyncio
import json
import time
from typing import Any, Protocol

import httpx
from openai import (
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    AsyncStream,
    OpenAIError,
    RateLimitError,
)
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from app.errors import LLMError
from app.llm.streamed import StreamedCompletion
from app.llm.types import Completion, CompletionRequest, ToolCall
from app.metrics import LLM_ERRORS, LLM_SECONDS
from app.settings import Settings


class ChatModel(Protocol):
    """What the agent loop needs of a chat model: ChatLLM (an endpoint) or LocalLLM (app/llm/local.py)."""

    default_model: str
    # The name of a demo model (the packaged offline one: too small to remember reliably), None for a real one.
    demo_model: str | None

    async def complete(self, request: CompletionRequest) -> Completion: ...


class ChatLLM:
    demo_model: str | None = None

    def __init__(self, settings: Settings):
        self.default_model = settings.default_llm_model
        self.temperature = settings.llm_temperature
        self.stream = settings.llm_stream
        self._client = AsyncOpenAI(
            base_url=settings.llm_base_url,
            # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
            api_key=settings.openai_api_key or "unused",
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )

    async def complete(self, request: CompletionRequest) -> Completion:
        """One chat completion, streamed when the request's `on_progress` is given (and ENGRAM_LLM_STREAM allows). The SDK
        retries timeouts, 429 and 5xx with exponential backoff and jitter (ENGRAM_LLM_MAX_RETRIES) before an answer
        starts; a stream that breaks off fails the call."""
        kwargs: dict[str, Any] = {"model": request.model or self.default_model, "messages": request.messages}
        if request.tools:
            kwargs["tools"] = request.tools
            kwargs["tool_choice"] = "auto"
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        started = time.perf_counter()
        try:
            async with asyncio.timeout(request.budget_seconds):
                if request.on_progress is not None and self.stream:
                    completion = await self._streamed(kwargs, StreamedCompletion(request.on_progress))
                else:
                    completion = await self._whole(kwargs)
        except (APITimeoutError, TimeoutError) as exc:
            raise _failed("timeout", f"the LLM did not answer in time ({type(exc).__name__})", started) from exc
        except RateLimitError as exc:
            raise _failed("rate_limited", f"the LLM endpoint kept rate-limiting: {exc}", started) from exc
        except APIStatusError as exc:
            raise _failed(f"http_{exc.status_code}", f"the LLM endpoint failed: {exc}", started) from exc
        except (OpenAIError, httpx.HTTPError) as exc:  # httpx's: a stream cut off mid-answer
            raise _failed("connection", f"the LLM call failed: {exc}", started) from exc
        except LLMError as exc:  # an answer with nothing usable in it
            raise _failed("unusable", str(exc), started) from exc
        LLM_SECONDS.labels("ok").observe(time.perf_counter() - started)
        return completion

    async def _whole(self, kwargs: dict[str, Any]) -> Completion:
        # Not chat.completions.create(): it walks the request through the SDK's TypedDict transform, ~160 ms of
        # event-loop time for a 900-message context (measured); Engram's request is plain JSON already.
        response = await self._client.post("/chat/completions", body=kwargs, cast_to=ChatCompletion)
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

    async def _streamed(self, kwargs: dict[str, Any], answer: StreamedCompletion) -> Completion:
        body = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        chunks = await self._client.post(
            "/chat/completions", body=body, cast_to=ChatCompletion, stream=True, stream_cls=AsyncStream[ChatCompletionChunk]
        )
        async with chunks:
            async for chunk in chunks:
                answer.add(chunk)
        return answer.completion(kwargs["messages"], kwargs.get("tools", []))


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
