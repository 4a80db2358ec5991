"""Sleep-time memory: conversations handed in by services that run their own LLM, and memory passes over what was
said (app/chat/memory_pass.py)."""

import uuid
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from app.api.deps import AgentIdDep, MeterDep
from app.api.errors import ERROR_RESPONSES, ErrorBody
from app.db import transaction
from app.memory.recall.handed_in import hand_in
from app.memory.schemas import HandInRead, HandInRequest
from app.runtime import runtime

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["memory pass"], responses=ERROR_RESPONSES)
NO_LLM: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "A memory pass was asked for and no LLM is configured"}
}


class MemoryPassQueued(BaseModel):
    pass_id: uuid.UUID = Field(
        description="the pass: a turn of kind `memory_pass` (GET …/turns/{pass_id}; its events on …/ws); when one was "
        "already running, that one"
    )


@router.post(
    "/messages",
    status_code=201,
    responses={
        409: {
            "model": ErrorBody,
            "description": "An id was handed in before with another message (role, content or occurred_at), or a "
            "concurrent request is handing in messages with the same ids",
        },
        **NO_LLM,
    },
)
async def hand_in_messages(agent_id: AgentIdDep, body: HandInRequest, request: Request, meter: MeterDep) -> HandInRead:
    """Hand in a conversation the agent took no part in (a service that runs its own LLM): stored in recall memory,
    embedded and dated as given, without running the agent; never put into the agent's context window. A message
    whose `id` was handed in before is not stored again, so a retry is safe; an `id` handed in before with another
    message (other role or content, or another `occurred_at` given) is a 409 naming it, and nothing is stored. Up to
    500 messages a request: hand a longer conversation in over several. `memory_pass: true` queues a memory pass over them."""
    state = runtime(request.app)
    if body.memory_pass:
        state.turn_streams.turns.passes.require_llm()  # refused before anything is stored
    async with transaction(state.sessions) as session:
        handed = await hand_in(session, state.embedder, agent_id, body.messages)
    pass_id = await state.turn_streams.turns.passes.request(agent_id, meter) if body.memory_pass else None
    return HandInRead(
        message_ids=handed.message_ids,
        stored=handed.stored,
        already_stored=len(body.messages) - handed.stored,
        memory_pass_id=pass_id,
    )


@router.post("/memory-pass", status_code=202, responses=NO_LLM)
async def start_memory_pass(agent_id: AgentIdDep, request: Request, meter: MeterDep) -> MemoryPassQueued:
    """Queue a sleep-time memory pass: the agent's LLM, with memory tools only, goes over what was said since the last
    pass and keeps memory (facts stored and dated, stale ones superseded, core blocks rewritten). One runs at a time
    per agent; it never delays the agent's turns. Watch it on the WebSocket or read it with GET …/turns/{pass_id}."""
    passes = runtime(request.app).turn_streams.turns.passes
    return MemoryPassQueued(pass_id=await passes.request(agent_id, meter, admit=True))
