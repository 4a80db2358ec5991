"""Letta agent files (`.af`) translated into Engram's export document, written to Letta's schema rather than to any
one file, and tolerant of missing optional fields. Two generations exist:

- letta ≤ 0.7: the agent at the top level, blocks inline in `core_memory`, tools inline in `tools`, the context as
  `in_context_message_indices`;
- letta ≥ 0.8 (AgentFileSchema): `agents`, `blocks`, `tools` (and `sources`, `files`, `groups`, `mcp_servers`) at
  the top level, an agent naming its blocks and tools by `block_ids` / `tool_ids`, its context by
  `in_context_message_ids`.

Messages of both: `content` as a string or a list of parts (`text`, `reasoning`, …) or, older still, `text`;
tool calls in OpenAI's shape (`{"id", "function": {"name", "arguments"}}`), tool results in `content` or
`tool_returns`. What Engram has no place for (Letta's own tools, files, tool rules, the LLM settings) is reported,
never dropped silently. Dates: a message's `created_at` (or `date`, as Letta's API names it) is when it was said, a
passage's `created_at` when it was stored; each becomes the row's created_at and occurred_at (Letta keeps no other
date of a fact, nor when it stopped being true)."""

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.chat.tools import TOOLS
from app.errors import Unprocessable
from app.memory.schemas import DEFAULT_BLOCK_LIMIT, MAX_BLOCK_LIMIT, MAX_BLOCKS
from app.models_base import utcnow

# Letta tools whose job an Engram tool does (Engram's own names are kept as they are).
EQUIVALENTS = {
    "archival_memory_insert": "archival_memory_create",
    "memory_insert": "core_memory_append",
    "memory_replace": "core_memory_replace",
    "memory_rethink": "core_memory_update",
}
MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "tool": "tool", "function": "tool", "system": "system"}
PASSAGE_KEYS = ("passages", "archival_memory", "archival_passages")


@dataclass
class Report:
    skipped_tools: list[str] = field(default_factory=list)
    mapped_tools: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def looks_like_agent_file(body: dict[str, Any]) -> bool:
    return isinstance(body.get("agents"), list) or any(key in body for key in ("core_memory", "memory_blocks", "agent_type"))


def to_document(body: dict[str, Any]) -> tuple[dict[str, Any], Report]:
    """An Engram document (still to be validated) and what did not carry over."""
    report = Report()
    try:
        return _translate(body, report), report
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        # A structure of the wrong shape somewhere (a list where an object belongs…): say so rather than fail.
        raise Unprocessable(f"not a readable Letta agent file: {type(exc).__name__}: {exc}") from None


def _translate(body: dict[str, Any], report: Report) -> dict[str, Any]:
    agent, blocks, tools = _agent_parts(body, report)
    file_time = _time(body.get("created_at"), utcnow())
    created = _time(agent.get("created_at"), file_time)

    tool_names = [str(t.get("name") or (t.get("json_schema") or {}).get("name") or "") for t in tools]
    tool_names += [t for t in agent.get("tools") or [] if isinstance(t, str)]  # CreateAgent names tools
    for name in dict.fromkeys(n for n in tool_names if n):
        engram = name if name in TOOLS else EQUIVALENTS.get(name)
        if engram:
            report.mapped_tools[name] = engram
        else:
            report.skipped_tools.append(name)
    if agent.get("tool_rules"):
        report.notes.append(f"tool rules are not imported ({len(agent['tool_rules'])}): Engram's loop has its own")
    model = (agent.get("llm_config") or {}).get("model") or agent.get("model")
    if model:
        report.notes.append(f"the Letta agent ran on {model}; here the server's LLM serves it (PATCH `model` to choose)")
    if agent.get("description"):
        report.notes.append(f"the agent's description is not kept: {str(agent['description'])[:200]}")

    messages, context_start, system_from_messages = _messages(agent, created, report)
    system = agent["system"] if isinstance(agent.get("system"), str) else system_from_messages
    return {
        "format": "engram.agent",
        "version": 1,
        "exported_at": file_time.isoformat(),
        "agent": {
            "id": str(uuid.uuid4()),
            "name": str(agent.get("name") or "letta agent")[:200],
            "system": system or None,
            "created_at": created.isoformat(),
            "updated_at": _time(agent.get("updated_at"), created).isoformat(),
            "context_start": context_start,
        },
        "blocks": _blocks(blocks, created, report),
        "passages": _passages(body, agent, created),
        "messages": messages,
        "turns": [],
    }


def _agent_parts(body: dict[str, Any], report: Report) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The agent, its blocks and its tools, as either generation of the file holds them."""
    if not isinstance(body.get("agents"), list):  # letta ≤ 0.7: the agent is the document
        return body, _dicts(body.get("core_memory")) + _dicts(body.get("memory_blocks")), _dicts(body.get("tools"))
    agents = [a for a in body["agents"] if isinstance(a, dict)]
    if not agents:
        raise Unprocessable("the Letta agent file has no agent in `agents`")
    agent = agents[0]
    if len(agents) > 1:
        others = ", ".join(str(a.get("name")) for a in agents[1:])
        report.notes.append(f"the file holds {len(agents)} agents; imported the first, {agent.get('name')!r} (not: {others})")
    for kind in ("sources", "files", "groups", "mcp_servers"):
        if body.get(kind):
            report.notes.append(f"{kind} are not imported ({len(body[kind])} in the file)")
    blocks = _chosen(_dicts(body.get("blocks")), agent.get("block_ids")) + _dicts(agent.get("memory_blocks"))
    return agent, blocks, _chosen(_dicts(body.get("tools")), agent.get("tool_ids"))


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _chosen(items: list[dict[str, Any]], ids: Any) -> list[dict[str, Any]]:
    """The items an agent names by id (all of them when the agent has no such list)."""
    if not isinstance(ids, list):
        return items
    by_id = {item.get("id"): item for item in items}
    return [by_id[i] for i in ids if i in by_id]


def _time(value: Any, fallback: datetime) -> datetime:
    if not isinstance(value, str):
        return fallback
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return fallback
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)  # Letta wrote naive times in UTC


def _label(raw: Any, taken: set[str]) -> str:
    label = re.sub(r"[^a-z0-9_]", "_", str(raw or "block").lower()).strip("_") or "block"
    label = label if label[0].isalpha() else f"b_{label}"
    label, base, n = label[:64], label[:60], 2
    while label in taken:
        label, n = f"{base}_{n}", n + 1
    taken.add(label)
    return label


def _blocks(blocks: list[dict[str, Any]], created: datetime, report: Report) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for block in blocks:
        value = str(block.get("value") or "")
        label = _label(block.get("label") or block.get("name"), taken)
        if label != block.get("label"):
            report.notes.append(f"block {block.get('label')!r} is imported as {label!r} (labels are lower-case identifiers)")
        given = block.get("limit")
        limit = given if isinstance(given, int) and given > 0 else DEFAULT_BLOCK_LIMIT
        limit = max(min(limit, MAX_BLOCK_LIMIT), len(value))  # never below what the block holds
        if limit > MAX_BLOCK_LIMIT:
            raise Unprocessable(f"block {label!r} holds {len(value)} characters, over Engram's {MAX_BLOCK_LIMIT} per block")
        updated = _time(block.get("updated_at") or block.get("created_at"), created)
        out.append(
            {
                "label": label,
                "value": value,
                "limit": limit,
                "description": str(block["description"]) if block.get("description") else None,
                "read_only": bool(block.get("read_only", False)),
                "version": 1,
                "updated_at": updated.isoformat(),
                "history": [{"version": 1, "value": value, "source": "api", "created_at": updated.isoformat()}],
            }
        )
    if len(out) > MAX_BLOCKS:
        raise Unprocessable(f"the agent has {len(out)} memory blocks; Engram keeps at most {MAX_BLOCKS}")
    return out


def _passages(body: dict[str, Any], agent: dict[str, Any], created: datetime) -> list[dict[str, Any]]:
    sources = (agent,) if agent is body else (agent, body)  # the older generation: the agent is the file
    found = [p for key in PASSAGE_KEYS for source in sources for p in _dicts(source.get(key))]
    out = []
    for p in found:
        text = p.get("text") or p.get("content")
        if isinstance(text, str) and text.strip():
            tags = [str(t).strip().lower()[:64] for t in p.get("tags") or [] if str(t).strip()]
            out.append(
                {
                    "id": str(uuid.uuid4()),
                    "content": text,
                    "tags": list(dict.fromkeys(tags)),
                    "created_at": _time(p.get("created_at"), created).isoformat(),
                }
            )
    return out


def _text(message: dict[str, Any]) -> str:
    """The text of a message: its text parts (and reasoning, which Engram keeps as an assistant's monologue)."""
    content = message.get("content")
    if content is None:
        content = message.get("text")
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            value = part.get("text") or part.get("reasoning")
            if isinstance(value, str):
                parts.append(value)
    return "\n".join(parts)


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    calls = []
    for call in _dicts(message.get("tool_calls")):
        function = call.get("function")
        if not isinstance(function, dict):
            function = call
        name = str(function.get("name") or "")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments or {}, ensure_ascii=False)
        if name == "send_message":  # Letta's argument is `message`; Engram's (and its recall search) `text`
            try:
                decoded = json.loads(arguments)
                if isinstance(decoded, dict) and "message" in decoded and "text" not in decoded:
                    arguments = json.dumps({"text": decoded["message"]}, ensure_ascii=False)
            except (ValueError, RecursionError):
                pass
        calls.append({"id": str(call.get("id") or f"call_{uuid.uuid4().hex[:12]}"), "name": name, "arguments": arguments})
    return calls or None


def _user_text(text: str) -> tuple[str, str]:
    """(role, text) of a Letta user message: its packaged form `{"type": "user_message", "message": …}` unwrapped;
    Letta's own notices (heartbeats, logins, alerts) become system notices, which is what they are."""
    try:
        packaged = json.loads(text)
    except (ValueError, RecursionError):
        return "user", text
    if not isinstance(packaged, dict) or "type" not in packaged:
        return "user", text
    if packaged["type"] == "user_message" and isinstance(packaged.get("message"), str):
        return "user", packaged["message"]
    return "system", text


def _messages(agent: dict[str, Any], created: datetime, report: Report) -> tuple[list[dict[str, Any]], int, str | None]:
    """The history, where the context starts in it, and the text of a leading system message (Letta's compiled
    prompt)."""
    raw = _dicts(agent.get("messages"))
    in_context_ids = agent.get("in_context_message_ids")
    in_context_indices = agent.get("in_context_message_indices")
    in_context = (
        {i for i, m in enumerate(raw) if m.get("id") in set(in_context_ids)}
        if isinstance(in_context_ids, list)
        else {i for i in in_context_indices if isinstance(i, int)}
        if isinstance(in_context_indices, list)
        else set(range(len(raw)))
    )
    out: list[dict[str, Any]] = []
    context_start: int | None = None
    compiled_prompt: str | None = None
    names: dict[str, str] = {}
    skipped: dict[str, int] = {}
    when = created
    for index, message in enumerate(raw):
        role = MESSAGE_ROLES.get(str(message.get("role")))
        if role is None:
            skipped[str(message.get("role"))] = skipped.get(str(message.get("role")), 0) + 1
            continue
        text = _text(message)
        when = _time(message.get("created_at") or message.get("date"), when)
        entry: dict[str, Any] = {"id": str(uuid.uuid4()), "role": role, "content": text, "created_at": when.isoformat()}
        if role == "user":
            entry["role"], entry["content"] = _user_text(text)
        elif role == "assistant":
            entry["tool_calls"] = _tool_calls(message)
            names.update({c["id"]: c["name"] for c in entry["tool_calls"] or []})
        elif role == "tool":
            returns = _dicts(message.get("tool_returns"))
            call_id = message.get("tool_call_id") or (returns[0].get("tool_call_id") if returns else None)
            if not text and returns:
                text = str(returns[0].get("func_response") or returns[0].get("tool_return") or returns[0].get("stdout") or "")
            entry["content"] = text
            entry["tool_call_id"] = str(call_id) if call_id else None
            name = message.get("name") or names.get(str(call_id))
            entry["name"] = str(name) if name else None
        if role == "system" and not out:
            # Letta's compiled prompt (its system prompt and memory as they were): kept in recall memory, outside the
            # context, since Engram renders its prompt from the blocks itself.
            compiled_prompt = text
        elif context_start is None and index in in_context:
            context_start = len(out)
        out.append(entry)
    if skipped:
        report.notes.append("messages not imported: " + ", ".join(f"{n} of role {r!r}" for r, n in skipped.items()))
    return out, len(out) if context_start is None else context_start, compiled_prompt
