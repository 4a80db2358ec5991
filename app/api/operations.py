"""What operators and tools read about the service itself: which models serve it, and Prometheus metrics. Metrics
span every tenant, so once API keys are configured only the admin key reads them (a scraper sends it as its bearer
token); with none, loopback clients do, as on every route."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from app import __version__
from app.api.deps import TenantDep, authenticate
from app.auth.principal import Forbidden, Principal
from app.runtime import runtime

router = APIRouter()


class ChatModelRead(BaseModel):
    model: str = Field(description="the model agents use unless they name their own")
    demo: bool = Field(description="the packaged offline demo model: a turn runs, but it does not remember reliably")


class ServiceRead(BaseModel):
    version: str
    llm: ChatModelRead | None = Field(description="null: no LLM configured, so chat answers 503 (memory works)")
    embedding_model: str
    embedding_dim: int


@router.get("/v1/service", tags=["ops"])
async def service(request: Request, _: TenantDep) -> ServiceRead:
    """The service's version and models: a client can tell its user that chat is off, or answered by a demo model,
    before the first message (as the console does)."""
    state = runtime(request.app)
    llm = state.turn_streams.turns.runner.llm
    return ServiceRead(
        version=__version__,
        llm=ChatModelRead(model=llm.default_model, demo=llm.demo_model is not None) if llm is not None else None,
        embedding_model=state.embedder.model,
        embedding_dim=state.embedder.dim,
    )


async def operator(request: Request, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if principal.admin or not await runtime(request.app).authenticator.keys_configured():
        return principal
    raise Forbidden("metrics span every tenant: read them with the admin key (ENGRAM_ADMIN_KEY)")


@router.get("/metrics", include_in_schema=False)
async def metrics(_: Annotated[Principal, Depends(operator)]) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
