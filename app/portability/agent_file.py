"""An export document written as a Letta agent file (`.af`, the AgentFileSchema of letta ≥ 0.8): what Letta's
importer reads, and what Engram's own importer (letta.py) reads back. Ids are the file's own (`agent-0`,
`block-0`, `message-0`), as Letta writes them. Engram keeps more than the format holds: block revisions, turns and
superseded passages stay behind, and current archival passages travel in a top-level `passages` list (Letta's
importer ignores a field it does not know; Engram's reads it)."""

import json
from typing import Any

from app.portability.schemas import AgentDocument, MessageDoc

AGENT_TYPE = "memgpt_agent"  # Letta's agent that speaks through send_message, as Engram's does


def to_agent_file(
    document: AgentDocument, *, model: str, context_window: int, embedding_model: str, embedding_dim: int, messages: bool = True
) -> dict[str, Any]:
    """`messages=False`: the agent without its conversation (Letta's scrub_messages)."""
    agent = document.agent
    kept = [m for m in document.messages if not m.handed_in] if messages else []
    ids = {m.id: f"message-{i}" for i, m in enumerate(kept)}
    out_of_context = {m.id for m in document.messages[: agent.context_start]}
    block_ids = [f"block-{i}" for i in range(len(document.blocks))]
    return {
        "agents": [
            {
                "id": "agent-0",
                "name": agent.name,
                "system": agent.system or "",
                "agent_type": AGENT_TYPE,
                "llm_config": {"model": model, "model_endpoint_type": "openai", "context_window": context_window},
                "embedding_config": {
                    "embedding_model": embedding_model,
                    "embedding_endpoint_type": "openai",
                    "embedding_dim": embedding_dim,
                },
                "block_ids": block_ids,
                "tool_ids": [],
                "tool_rules": [],
                "tags": [],
                "metadata": {},
                "include_base_tools": False,
                "created_at": agent.created_at.isoformat(),
                "updated_at": agent.updated_at.isoformat(),
                "messages": [_message(m, ids[m.id]) for m in kept],
                "in_context_message_ids": [ids[m.id] for m in kept if m.id not in out_of_context],
            }
        ],
        "blocks": [
            {
                "id": block_id,
                "label": b.label,
                "value": b.value,
                "limit": b.limit,
                "description": b.description,
                "read_only": b.read_only,
                "metadata": {},
            }
            for block_id, b in zip(block_ids, document.blocks, strict=True)
        ],
        "passages": [
            {"id": f"passage-{i}", "text": p.content, "tags": p.tags, "created_at": (p.occurred_at or p.created_at).isoformat()}
            for i, p in enumerate(q for q in document.passages if q.superseded_by is None)
        ],
        "groups": [],
        "files": [],
        "sources": [],
        "tools": [],
        "mcp_servers": [],
        "metadata": {"exported_by": "engram"},
        "created_at": document.exported_at.isoformat(),
    }


def _message(m: MessageDoc, file_id: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": file_id,
        "role": m.role,
        "content": [{"type": "text", "text": m.content}] if m.content else [],
        "created_at": (m.occurred_at or m.created_at).isoformat(),
    }
    if m.tool_calls:
        entry["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _letta_arguments(c.name, c.arguments)}}
            for c in m.tool_calls
        ]
    if m.role == "tool":
        entry["tool_call_id"] = m.tool_call_id
        entry["name"] = m.name
    return entry


def _letta_arguments(name: str, arguments: str) -> str:
    """Letta's send_message takes `message`, Engram's `text` (letta.py turns it back on import)."""
    if name != "send_message":
        return arguments
    try:
        decoded = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    if isinstance(decoded, dict) and "text" in decoded and "message" not in decoded:
        return json.dumps({"message": decoded["text"]}, ensure_ascii=False)
    return arguments
