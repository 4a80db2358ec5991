"""How a LangGraph store's items are archival passages: the namespace's first label names the agent, the rest and the
item's key make the passage's key (`prefs:drink`), and the rest are its tags too; the value is the passage's text."""

import json
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.store.base import MatchCondition

KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._@")  # as they are in a key
ESCAPED = re.compile(r"(?:~[0-9A-F]{2})+")
MAX_TAGS, MAX_TAG_CHARS = 16, 64  # what a passage holds
ORDER = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def engram_key(path: Sequence[str], key: str) -> str:
    """The passage key of `key` under the labels `path` (the namespace after the agent's): the parts joined by `:`,
    each character a key cannot hold (and `:`, `~`, a leading `.`) written as `~` and the hex of its UTF-8 bytes."""
    joined = ":".join("".join(c if c in KEPT else _hex(c) for c in part) for part in (*path, key))
    return _hex(".") + joined[1:] if joined.startswith(".") else joined


def path_and_key(engram: str) -> tuple[tuple[str, ...], str] | None:
    """The labels and key an `engram_key` was made of; None for a key this store would not have written."""
    *path, key = (ESCAPED.sub(_unescaped, part) for part in engram.split(":"))
    return (tuple(path), key) if engram_key(path, key) == engram else None


def tags(path: Sequence[str]) -> list[str]:
    """The namespace's labels (after the agent's) a passage is tagged with, for searches to narrow by: those a tag
    can hold, the first 16."""
    return [label for label in path if len(label.strip()) <= MAX_TAG_CHARS][:MAX_TAGS]


def content(value: Mapping[str, Any]) -> str:
    """A value's passage text: its `text` alone when that is all it holds (and could not be read as JSON), else the
    value as JSON."""
    text = value.get("text")
    if set(value) == {"text"} and isinstance(text, str) and text.strip() and _json_object(text) is None:
        return text
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def value(content: str) -> dict[str, Any]:
    return _json_object(content) or {"text": content}


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _unescaped(escaped: re.Match[str]) -> str:
    return bytes.fromhex(escaped.group().replace("~", "")).decode(errors="replace")


def _hex(character: str) -> str:
    return "".join(f"~{byte:02X}" for byte in character.encode())


def matches(value: Any, wanted: Any) -> bool:
    """Whether a value's field holds what a search's `filter` asks of it, as LangGraph's stores read a filter: the
    same value (a dict: each of its fields, recursively), or operators `$eq $ne $gt $gte $lt $lte`."""
    if isinstance(wanted, Mapping):
        if any(str(name).startswith("$") for name in wanted):
            return all(_compared(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, Mapping) and all(matches(value.get(name), field) for name, field in wanted.items())
    return bool(value == wanted)


def _compared(value: Any, op: str, operand: Any) -> bool:
    if op in ("$eq", "$ne"):
        return bool(value == operand) == (op == "$eq")
    if op not in ORDER:
        raise ValueError(f"unknown filter operator {op!r}: $eq, $ne, $gt, $gte, $lt or $lte")
    try:
        return bool(ORDER[op](value, operand))
    except TypeError:
        return False  # nothing to compare (a missing field, a string against a number)


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """Whether `namespace` starts (or ends) with the condition's labels, `*` matching any one."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(wanted in ("*", label) for label, wanted in zip(labels, path, strict=True))
