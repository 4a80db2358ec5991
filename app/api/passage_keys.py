"""Archival passages under the caller's keys: `PUT`, `GET` and `DELETE …/archival/keys/{key}`."""

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from app.api.deps import AgentDep, AgentIdDep, ArchivalMemoryDep
from app.api.errors import ERROR_RESPONSES, ErrorBody
from app.memory.archival import keys as passage_keys
from app.memory.archival.service import NewPassage
from app.memory.schemas import KEY, KEY_PATTERN, MAX_KEY_CHARS, PassageErasureRead, PassageRead, PassageWrite

router = APIRouter(prefix="/v1/agents/{agent_id}/archival/keys", tags=["memory"], responses=ERROR_RESPONSES)

Key = Annotated[str, Path(min_length=1, max_length=MAX_KEY_CHARS, pattern=KEY_PATTERN, description=KEY)]
NO_PASSAGE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "Unknown agent, or no current passage holds the key"}
}


@router.put(
    "/{key}",
    responses={
        201: {"model": PassageRead, "description": "Nothing held the key: the passage is stored under it"},
        409: {"model": ErrorBody, "description": "A concurrent change of the same passage (retry)"},
    },
)
async def put_keyed_passage(
    agent_id: AgentIdDep, key: Key, body: PassageWrite, archival: ArchivalMemoryDep, response: Response
) -> PassageRead:
    """Store a passage under your key (201), or supersede the passage the key holds with it (200, the new passage):
    the old one stays, `superseded_by` the new one and with the key, as `POST …/supersede` leaves it. Tags, date and
    sources are the body's (not the old passage's). The passage the key holds already (the same text, tags and
    sources, and date if one is given) is answered as it is, with `duplicate: true`, and no version is added."""
    put = await passage_keys.put(archival, agent_id, key, NewPassage.of(body))
    if put.outcome == "created":
        response.status_code = 201
    return PassageRead.of(put.passage, duplicate=put.outcome == "unchanged")


@router.get("/{key}", responses=NO_PASSAGE)
async def get_keyed_passage(agent: AgentDep, key: Key, archival: ArchivalMemoryDep) -> PassageRead:
    """The passage your key holds now (its earlier versions, with the key: `GET …/archival?include_superseded=true`)."""
    return PassageRead.of(await passage_keys.get(archival, agent.id, key))


@router.delete("/{key}", responses=NO_PASSAGE)
async def delete_keyed_passage(agent: AgentDep, key: Key, archival: ArchivalMemoryDep) -> PassageErasureRead:
    """Erase the passage your key holds with the key's earlier versions (in `erased_passages`: a deleted key's value
    does not come back), and what was drawn from them alone, as `DELETE …/archival/{passage_id}` erases; the key is
    free again. Answers what went."""
    passage_id, erasure = await passage_keys.erase(archival, agent.id, key)
    return PassageErasureRead(id=passage_id, erased_passages=erasure.passages, sources_trimmed=erasure.trimmed)
