"""What the framework integrations (openai_agents, langgraph) share: memory for a model's prompt, recollected for the
recent conversation as the framework holds it."""

from collections.abc import Iterable
from typing import Literal

from engram_client import _turns
from engram_client._core import Flow, Id
from engram_client.inputs import ConversationLine

Role = Literal["user", "assistant"]
MAX_LINES = 50  # of the recent conversation, as a recollection request takes them
MAX_LINE_CHARS = 32_000


def recollection(agent_id: Id, said: Iterable[tuple[Role, str]], *, max_chars: int | None = None) -> Flow[str]:
    """The agent's memory for the conversation `said` (oldest first), for its last user line: core memory and what
    bears on it; "" when nobody spoke yet. The lines given are in front of the model already and are not handed
    back, so a session's recent messages are not repeated."""
    recent = [ConversationLine(role=role, content=text[:MAX_LINE_CHARS]) for role, text in said if text.strip()][-MAX_LINES:]
    if not any(line.role == "user" for line in recent):
        return ""
    memory = yield from _turns.recall(agent_id, messages=recent, max_chars=max_chars)
    return memory.text


def with_memory(instructions: str, memory: str) -> str:
    return f"{instructions}\n\n{memory}" if memory and instructions else memory or instructions
