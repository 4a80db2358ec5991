from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from app.api.deps import AgentDep, EmbedderDep, SessionDep, TenantDep
from app.api.errors import ERROR_RESPONSES
from app.portability.schemas import AgentDocument, ImportResult
from app.portability.service import export_agent, import_document, read_upload

router = APIRouter(prefix="/v1/agents", tags=["portability"], responses=ERROR_RESPONSES)

Upload = Annotated[
    Any,
    Body(
        description="An Engram export (`AgentDocument`, as `GET …/export` returns it) or a Letta agent file (`.af`, "
        "either schema generation; also when serialised twice, as a JSON string)",
    ),
]


@router.get("/{agent_id}/export")
async def export(
    agent: AgentDep,
    session: SessionDep,
    embedder: EmbedderDep,
    embeddings: Annotated[bool, Query(description="include the vectors (else the importing server embeds again)")] = True,
) -> AgentDocument:
    """The agent and everything it remembers as one versioned document: blocks with their history, passages,
    messages, turns with their events."""
    return await export_agent(session, agent, embedder, embeddings=embeddings)


# The body is read as any JSON and checked by the importer, which names what is wrong (a Letta file or an Engram
# export); the schema documents both.
UPLOAD_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "anyOf": [
                        {"$ref": "#/components/schemas/AgentDocument"},
                        {"type": "object", "description": "a Letta agent file (.af)", "additionalProperties": True},
                        {"type": "string", "description": "either of them serialised again as a JSON string"},
                    ]
                }
            }
        },
    }
}


@router.post("/import", status_code=201, openapi_extra=UPLOAD_SCHEMA)
async def import_agent(
    upload: Upload,
    session: SessionDep,
    embedder: EmbedderDep,
    principal: TenantDep,
    name: Annotated[
        str | None, Query(min_length=1, max_length=200, description="name the new agent (default: the file's)")
    ] = None,
) -> ImportResult:
    """Import an agent as a new one (new ids: importing twice gives two agents), in one transaction: a file that
    is not valid is a 422 naming what is wrong, and nothing is written. Vectors of another embedding model are
    computed again; a Letta file's tools that Engram lacks are listed in `skipped_tools`."""
    document, report = read_upload(upload)
    return await import_document(session, principal.tenant_id, document, embedder, name=name, report=report)
