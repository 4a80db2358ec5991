"""The MCP server: Engram's tools and resource (tools.py) with what each tool does to memory, whichever transport
carries them (http.py, stdio.py)."""

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from app import __version__
from app.mcp_server.tools import CallerOf, EngramTools

INSTRUCTIONS = """Engram gives AI agents long-term memory. Each agent has three memories: core memory (a few short,
labelled blocks the agent always sees, e.g. `persona` and `human`), archival memory (passages it searches when it
needs them, no size limit) and recall memory (every message ever exchanged with it). Call list_agents first: every
other tool takes an agent's id. Read core memory before editing it, and put details that are not needed in every
conversation into archival memory instead."""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
REWRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
CONVERSES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def build_server(
    caller_of: CallerOf, lifespan: Callable[[MCPServer], AbstractAsyncContextManager[Any]] | None = None
) -> MCPServer:
    """The tools and resources; `caller_of` says whom a request acts for (per HTTP request, or the stdio process)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        server: MCPServer = MCPServer("engram", instructions=INSTRUCTIONS, version=__version__, lifespan=lifespan)
    finally:  # MCPServer() calls logging.basicConfig (a handler and INFO on the root logger): logging stays Engram's
        root.handlers[:] = handlers
        root.setLevel(level)
    tools = EngramTools(caller_of)
    for tool, annotations in (
        (tools.list_agents, READ_ONLY),
        (tools.read_core_memory, READ_ONLY),
        (tools.edit_core_memory_block, REWRITES),
        (tools.insert_archival_memory, ADDS),
        (tools.search_archival_memory, READ_ONLY),
        (tools.search_conversation_history, READ_ONLY),
        (tools.recall_context, READ_ONLY),
        (tools.chat_with_agent, CONVERSES),
    ):
        server.add_tool(tool, annotations=annotations)
    server.resource(
        "engram://agents/{agent_id}/blocks/{label}",
        name="core-memory-block",
        description="The current value of one core memory block of an agent (labels: see the read_core_memory tool).",
        mime_type="text/plain",
    )(tools.core_memory_block)
    return server
