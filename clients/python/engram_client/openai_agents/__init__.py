"""Engram's memory for the OpenAI Agents SDK (`pip install 'engram-client[openai-agents]'`): `EngramSession`, the
conversation kept in an agent's recall memory; `memory_instructions`, recollection in the agent's instructions each
run; `memory_tools`, the function tools `remember` and `recall`."""

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, RunContextWrapper, Tool, function_tool

from engram_client._core import Id
from engram_client._frameworks import recollection, with_memory
from engram_client.client import AsyncEngram
from engram_client.openai_agents._items import said
from engram_client.openai_agents._session import EngramSession

__all__ = ["EngramSession", "memory_instructions", "memory_tools"]

Instructions = Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]


def memory_instructions(
    instructions: str, agent_id: Id, *, client: AsyncEngram | None = None, max_chars: int | None = None
) -> Instructions:
    """Dynamic instructions (an Agent's `instructions=`): `instructions`, then what the agent's memory holds for the
    run's latest input (core memory and the memories that bear on it, within `max_chars`, default 1,500), recollected
    each time the model is called. The conversation in front of the model (the session's items, the input) is not
    handed back."""
    engram = client or AsyncEngram()

    async def instructions_with_memory(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        lines = [line for item in context.turn_input if isinstance(item, dict) and (line := said(item)) is not None]
        memory = await engram._runner.run(recollection(agent_id, lines, max_chars=max_chars))
        return with_memory(instructions, memory)

    return instructions_with_memory


def memory_tools(agent_id: Id, *, client: AsyncEngram | None = None) -> list[Tool]:
    """The function tools `remember` (a fact kept for good in archival memory) and `recall` (memory searched)."""
    engram = client or AsyncEngram()

    @function_tool
    async def remember(fact: str) -> str:
        """Keep a fact in long-term memory for good, to be recalled in later conversations.

        Args:
            fact: The fact, as a sentence that stands alone (who, what, when).
        """
        passage = await engram.archival.add(agent_id, fact)
        return "Remembered already." if passage.duplicate else "Remembered."

    @function_tool
    async def recall(query: str) -> str:
        """Search long-term memory: the facts kept and earlier conversations.

        Args:
            query: What to look for, as a question or a few words.
        """
        memory = await engram.recall(agent_id, query, include_core=False)
        return memory.text or "Nothing in memory bears on it."

    return [remember, recall]
