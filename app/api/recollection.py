"""Recollection for any LLM: the memories a model should see before it answers, within a budget, for services that
run their own LLM call (mem0's `search` before the call, Zep's context block). The chat path recollects through the
same function (app/memory/recollection/recollector.py)."""

from fastapi import APIRouter

from app.api.deps import AgentDep, RecollectorDep, SettingsDep
from app.api.errors import ERROR_RESPONSES
from app.api.replica_reads import reads_only
from app.memory.recollection.schemas import RecollectionRead, RecollectionRequest, recollected

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["memory"], responses=ERROR_RESPONSES)


@router.post("/recollection")
@reads_only  # a query sent as a body: read without a transaction, as a search is
async def recollect(
    agent: AgentDep, body: RecollectionRequest, recollector: RecollectorDep, settings: SettingsDep
) -> RecollectionRead:
    """The memory an LLM should see before it answers `query` (or the last user message of `messages`): core memory,
    then the archival passages and earlier messages that bear on it, the best that fit within `max_chars` characters,
    as a prompt-ready `text` (memories framed as data, one line each, under the day they are dated, in the order they
    were said) and as a list in the same order. Nothing is recollected when memory holds nothing about the message;
    superseded passages only `as_of` a time they were valid. `text` is written for your own model: without the
    agent's `persona` block and without a word of Engram's tools unless `core_blocks` and `can_search` ask for them."""
    return await recollected(recollector, agent.id, body, budget=settings.recollection_chars)
