"""Bulk imports into archival memory as jobs (app/memory/archival/imports.py): JSON lines or a JSON array of passages, up to
ENGRAM_MAX_IMPORT_BYTES, stored in the background with progress; `POST …/archival/batch` stays for small batches."""

import json
import re
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from app.api.deps import AgentIdDep, SessionDep
from app.api.errors import ERROR_RESPONSES, JSON_MEDIA_TYPE
from app.db import transaction
from app.errors import Unprocessable, UnsupportedMediaType, format_validation
from app.memory.archival.imports import cancel_job, create_job, describe, get_job
from app.memory.archival.service import ArchivalMemory
from app.memory.schemas import ImportJobRead, PassageWrite
from app.runtime import runtime

router = APIRouter(prefix="/v1/agents/{agent_id}/archival/import", tags=["memory"], responses=ERROR_RESPONSES)
PATH = re.compile(r"^/v1/agents/[^/]+/archival/import$")  # bodies up to ENGRAM_MAX_IMPORT_BYTES (app/main.py)
JSON_LINES = re.compile(r"application/(x-)?(ndjson|jsonl|json-lines|jsonlines)\s*(;|$)", re.IGNORECASE)
PASSAGE = {"$ref": "#/components/schemas/PassageWrite"}
BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "array", "items": PASSAGE, "minItems": 1}},
            "application/x-ndjson": {"schema": {"type": "string", "description": "JSON lines: one PassageWrite object per line"}},
        },
    }
}


def _decoded(raw: bytes | str, where: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unprocessable(f"{where} is not valid JSON ({exc})") from None


def parse_passages(body: bytes, content_type: str) -> list[PassageWrite]:
    """The passages of an import body; the first invalid one is a 422 naming its line (JSON lines) or index."""
    if JSON_LINES.match(content_type):
        lines = ((n, line) for n, line in enumerate(body.split(b"\n"), start=1) if line.strip())
        values = [(f"line {n}", _decoded(line, f"line {n}")) for n, line in lines]
    elif JSON_MEDIA_TYPE.match(content_type):
        array = _decoded(body, "the body")
        if not isinstance(array, list):
            raise Unprocessable('a JSON body must be an array of passages, [{"content": …}, …]')
        values = [(f"item {i}", value) for i, value in enumerate(array)]
    else:
        raise UnsupportedMediaType(
            "send JSON lines (Content-Type: application/x-ndjson) or a JSON array (Content-Type: application/json)"
        )
    if not values:
        raise Unprocessable("the import holds no passages")
    passages = []
    for where, value in values:
        try:
            passages.append(PassageWrite.model_validate(value))
        except ValidationError as exc:
            raise Unprocessable(f"{where}: {format_validation(exc.errors(), limit=3)}") from None
    return passages


@router.post("", status_code=202, openapi_extra=BODY)
async def start_import(agent_id: AgentIdDep, request: Request, response: Response) -> ImportJobRead:
    """Import passages as a job: answered at once (202) with the job; the passages are embedded and stored in the
    background, a slice at a time, while the agent keeps answering. The body is JSON lines (one passage object per
    line, `application/x-ndjson`) or a JSON array (`application/json`), up to ENGRAM_MAX_IMPORT_BYTES. Near-duplicates
    are stored once, as in a batch. The job survives restarts (it resumes where it stopped, storing no item twice).
    Sources are checked now: one that is not this agent's message or passage is a 422 naming it and its item."""
    state = runtime(request.app)
    passages = parse_passages(await request.body(), request.headers.get("content-type", ""))
    async with transaction(state.sessions) as session:
        await ArchivalMemory(session, state.embedder).check_sources(agent_id, *(p.sources for p in passages), itemised=True)
        job = await create_job(session, agent_id, passages)
        read = describe(job)
    state.imports.wake()
    response.headers["Location"] = f"/v1/agents/{agent_id}/archival/import/{job.id}"
    return read


@router.get("/{job_id}")
async def get_import(agent_id: AgentIdDep, job_id: uuid.UUID, session: SessionDep) -> ImportJobRead:
    """An import job's progress: items done of the total, the rate and the time left."""
    return describe(await get_job(session, agent_id, job_id))


@router.post("/{job_id}/cancel")
async def cancel_import(agent_id: AgentIdDep, job_id: uuid.UUID, session: SessionDep) -> ImportJobRead:
    """Stop an import job: the passages stored so far stay, the rest are dropped. A finished job is returned as is."""
    return describe(await cancel_job(session, agent_id, job_id))
