"""The system prompt and the message list the LLM sees."""

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.agents.models import Agent
from app.memory.models import MemoryBlock, Message
from app.memory.recollection.prompt_text import core_section

GUIDE = """\
You are {name}, an AI agent with a persistent memory that outlives this conversation. You run inside Engram.

## How you act
- You act only through tools. The user sees nothing but what you pass to `send_message`; every other word you \
write is your private inner monologue. Keep that monologue short.
- In each turn: think briefly, use memory tools as needed, then call `send_message` once to answer.
- Answer in the language the user writes in.

## Your memory
1. Core memory (below) is always in front of you. Each block has a size limit. Keep the key facts about the user \
in `human` and your own persona in `persona`. When a fact changes (a new name, a move), rewrite it with \
`core_memory_update` or `core_memory_replace` instead of appending a contradiction. When a block is nearly full, \
condense it and move details to archival memory.
2. Archival memory is an unlimited store you search by meaning and keywords. Save preferences, events, plans and \
details worth keeping with `archival_memory_create` (one self-contained fact per passage). Before you answer a \
question about something the user told you earlier, search it with `archival_memory_search`; never guess. \
Memories are dated when they happened. When a stored fact stops being true (the user moved, a plan or preference \
changed), replace it with `archival_memory_supersede` (its id, the new fact): the old one is kept as history.
3. Recall memory is the full conversation history. Only recent messages are in your context; find older ones \
with `conversation_search`.

If you cannot call tools natively, write exactly one call per line, for example:
send_message({{"text": "Hello!"}})"""


def system_prompt(
    agent: Agent,
    blocks: Sequence[MemoryBlock],
    now: datetime,
    *,
    memories: str | None = None,
    pressure: float | None = None,
) -> str:
    parts = [GUIDE.format(name=agent.name)]
    if agent.system:
        parts.append(f"## Instructions from your operator\n{agent.system}")
    parts.append(core_section(blocks))
    if agent.summary:
        parts.append(f"## Summary of the earlier conversation (now only in recall memory)\n{agent.summary}")
    if memories:  # recollection's section (app/memory/recollection/prompt_text.py)
        parts.append(memories)
    if pressure is not None:
        parts.append(
            f"## Memory pressure\nYour context window is {pressure:.0%} full. Older messages will soon be summarised "
            "and leave your context. Save anything important that is not yet stored to core or archival memory now."
        )
    parts.append(f"Current time: {now:%A %Y-%m-%d %H:%M %Z} (today's date: {now:%Y-%m-%d})")
    return "\n\n".join(parts)


def to_openai(message: Message) -> dict[str, Any]:
    if message.role == "assistant":
        # content may be null only beside tool calls; servers reject an assistant message with neither.
        out: dict[str, Any] = {"role": "assistant", "content": message.content or (None if message.tool_calls else "")}
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in message.tool_calls
            ]
        return out
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "system":
        # Mid-conversation system messages are rejected by several OpenAI-compatible servers.
        return {"role": "user", "content": json.dumps({"type": "system_notice", "message": message.content}, ensure_ascii=False)}
    return {"role": "user", "content": message.content}


def well_formed(messages: list[Message]) -> list[Message]:
    """Drop a leading fragment so that the window starts at a user message and no tool result loses its call."""
    for i, message in enumerate(messages):
        if message.role == "user":
            return messages[i:]
    return []
