"""Tool calls written as text, for models without native tool calling.

Accepted forms (optionally inside a ``` fence, one per line or a JSON list):
  send_message("Hello")  ·  core_memory_update(label="human", content="...")  ·  send_message({"text": "Hi"})
  {"name": "send_message", "arguments": {"text": "Hi"}}   (also "tool"/"function" and "args"/"parameters")
Only names of known tools are taken, so ordinary prose is never mistaken for a call.
"""

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*;?\s*$", re.DOTALL)


@dataclass
class TextToolCall:
    name: str
    arguments: dict[str, Any]


def parse_text_tool_calls(text: str, params_by_tool: Mapping[str, Sequence[str]]) -> list[TextToolCall]:
    """params_by_tool: tool name → parameter names in order (for positional arguments)."""
    body = _FENCE.sub("", text.strip()).strip()
    if not body:
        return []
    calls = _from_json(body, params_by_tool)
    if calls:
        return calls
    whole = _from_call_syntax(body, params_by_tool)
    if whole:
        return [whole]
    per_line = [_from_call_syntax(line, params_by_tool) for line in body.splitlines() if line.strip()]
    return [c for c in per_line if c] if per_line and all(per_line) else []


def _from_json(body: str, known: Mapping[str, Sequence[str]]) -> list[TextToolCall]:
    try:
        data = json.loads(body)
    except ValueError:
        return []
    items = data if isinstance(data, list) else [data]
    calls = []
    for item in items:
        if not isinstance(item, dict):
            return []
        name = item.get("name") or item.get("tool") or item.get("function")
        if isinstance(name, dict):  # {"function": {"name": ..., "arguments": ...}}
            item, name = name, name.get("name")
        args = item.get("arguments", item.get("args", item.get("parameters", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return []
        if not isinstance(name, str) or name not in known or not isinstance(args, dict):
            return []
        calls.append(TextToolCall(name, args))
    return calls


def _from_call_syntax(body: str, known: Mapping[str, Sequence[str]]) -> TextToolCall | None:
    match = _CALL.match(body)
    if not match or match.group(1) not in known:
        return None
    name, inner = match.group(1), match.group(2).strip()
    if inner.startswith("{"):
        try:
            args = json.loads(inner)
            return TextToolCall(name, args) if isinstance(args, dict) else None
        except ValueError:
            pass
    try:
        call = ast.parse(f"f({inner})", mode="eval").body
        assert isinstance(call, ast.Call)
        positional = [ast.literal_eval(a) for a in call.args]
        keywords = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except (SyntaxError, ValueError, AssertionError):
        return None
    params = list(known[name])
    if len(positional) > len(params):
        return None
    if len(positional) == 1 and isinstance(positional[0], dict) and not keywords:
        return TextToolCall(name, positional[0])
    return TextToolCall(name, {**dict(zip(params, positional, strict=False)), **keywords})
