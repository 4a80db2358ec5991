"""A Letta-compatible API under `/letta`: the official `letta-client` SDKs work against Engram with
`Letta(base_url="http://host:8000/letta", api_key=KEY)`. Each route translates Letta's shapes onto Engram's own
services (agents, memory, turn streams, portability); nothing here stores or decides anything itself. What is
supported, and how it differs from Letta, is in docs/letta.md."""

from fastapi import APIRouter

from app.letta_api import agents, memory, messages, unsupported

router = APIRouter(prefix="/letta")
# The 501s first (`/agents/count` is no agent id), the catch-all last: it answers what nothing else did.
for part in (unsupported.router, agents.router, memory.router, messages.router, unsupported.fallback):
    router.include_router(part)
