"""The parts of Letta's API Engram has no counterpart for answer 501 with what to do instead (docs/letta.md has
the whole table), rather than a 404 the SDK would report as a missing agent."""

import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from app.letta_api.common import DOCS, NotSupported

PARAM = re.compile(r"(\{[^/}]+\})")
router = APIRouter(prefix="/v1", include_in_schema=False)  # included before the supported routes
fallback = APIRouter(prefix="/v1", include_in_schema=False)  # included after them

# (methods, path under /letta/v1, why not and what instead)
UNSUPPORTED: list[tuple[list[str], str, str]] = [
    (["GET"], "/agents/count", "count the agents of GET /letta/v1/agents/"),
    (["POST"], "/agents/{agent_id}/recompile", "Engram renders the system prompt from the blocks at every step"),
    (["POST"], "/agents/{agent_id}/messages/async", "send with POST …/messages or stream with …/messages/stream"),
    (["POST"], "/agents/{agent_id}/messages/cancel", "a turn runs to its end, at most ENGRAM_MAX_STEPS steps"),
    (["PATCH"], "/agents/{agent_id}/reset-messages", "recall memory keeps every message; export and import to start over"),
    (["POST"], "/agents/{agent_id}/summarize", "Engram summarises the context itself when it fills up"),
    (["PATCH"], "/agents/{agent_id}/core-memory/blocks/attach/{block_id}", "blocks belong to one agent: no shared blocks"),
    (["PATCH"], "/agents/{agent_id}/core-memory/blocks/detach/{block_id}", "blocks belong to one agent: no shared blocks"),
    (["GET", "POST"], "/agents/{agent_id}/tools", "every agent has Engram's memory tools; custom tools are not supported"),
    (["PATCH", "POST"], "/agents/{agent_id}/tools/{rest:path}", "every agent has Engram's memory tools"),
    (["GET", "PATCH"], "/agents/{agent_id}/folders{rest:path}", "Engram has no folders or files"),
    (["GET", "PATCH"], "/agents/{agent_id}/files{rest:path}", "Engram has no folders or files"),
    (["PATCH"], "/agents/{agent_id}/archives/{rest:path}", "each agent has its own archival memory"),
    (["PATCH"], "/agents/{agent_id}/identities/{rest:path}", "Engram has no identities: use one tenant key per user"),
    (["GET", "POST", "DELETE"], "/agents/{agent_id}/schedule{rest:path}", "Engram does not schedule messages"),
    (["GET", "POST", "PATCH", "DELETE"], "/blocks/{rest:path}", "blocks belong to one agent: …/core-memory/blocks"),
    (["GET", "POST"], "/messages/{rest:path}", "list an agent's messages: GET /letta/v1/agents/{id}/messages"),
    (["POST"], "/passages/search", "search one agent's passages: GET /letta/v1/agents/{id}/archival-memory/search"),
]


def _refuse(why: str) -> Callable[[Request], Coroutine[Any, Any, None]]:
    async def refuse(request: Request) -> None:
        raise NotSupported(f"{request.method} {request.url.path} is not supported by Engram: {why} (see {DOCS})")

    return refuse


for methods, path, why in UNSUPPORTED:
    router.add_api_route(path, _refuse(why), methods=methods)


@fallback.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
async def not_supported(request: Request, rest: str) -> None:
    """The rest of Letta's API (tools, sources, folders, runs, templates…). A path the API serves, asked with a
    method it does not take, is a 405 as anywhere else."""
    if allowed := _served_methods(request):
        raise HTTPException(405, "Method Not Allowed", headers={"Allow": ", ".join(allowed)})
    raise NotSupported(f"{request.method} {request.url.path} is not part of Engram's Letta API (see {DOCS})")


def _served_methods(request: Request) -> list[str]:
    """The methods of the documented path that matches the request's (with or without a trailing slash)."""
    path = request.url.path.rstrip("/")
    for template, operations in request.app.openapi()["paths"].items():
        pattern = "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in PARAM.split(template.rstrip("/")))
        if re.fullmatch(pattern, path):
            return sorted(method.upper() for method in operations)
    return []
