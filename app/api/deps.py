"""Request dependencies: one transaction per request, services built on it, and agent lookups that 404 once."""

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.models import Agent
from app.agents.service import find_agent
from app.auth.principal import Forbidden, Principal, presented_key, require_tenant
from app.db import transaction
from app.llm.embeddings import Embedder
from app.memory.service import ArchivalMemory, CoreMemory, RecallMemory
from app.runtime import runtime
from app.settings import Settings


def get_settings_dep(request: Request) -> Settings:
    return runtime(request.app).settings


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    # scope="function": the commit runs before the response is sent, so a failed commit is an error response.
    async with transaction(runtime(request.app).sessions) as session:
        yield session


def get_embedder(request: Request) -> Embedder:
    return runtime(request.app).embedder


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
EmbedderDep = Annotated[Embedder, Depends(get_embedder)]


async def authenticate(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    x_api_key: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    client = request.client.host if request.client else None
    return await runtime(request.app).authenticator.authenticate(presented_key(authorization, x_api_key), client)


def tenant_principal(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    return require_tenant(principal)


def admin_principal(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if not principal.admin:
        raise Forbidden("this needs the admin key (ENGRAM_ADMIN_KEY)")
    return principal


TenantDep = Annotated[Principal, Depends(tenant_principal)]
AdminDep = Annotated[Principal, Depends(admin_principal)]


async def valid_agent(agent_id: Annotated[uuid.UUID, Path()], session: SessionDep, principal: TenantDep) -> Agent:
    return await find_agent(session, agent_id, tenant_id=principal.tenant_id)


AgentDep = Annotated[Agent, Depends(valid_agent)]


def get_core_memory(session: SessionDep) -> CoreMemory:
    return CoreMemory(session)


def get_archival_memory(session: SessionDep, embedder: EmbedderDep) -> ArchivalMemory:
    return ArchivalMemory(session, embedder)


def get_recall_memory(session: SessionDep, embedder: EmbedderDep) -> RecallMemory:
    return RecallMemory(session, embedder)


CoreMemoryDep = Annotated[CoreMemory, Depends(get_core_memory)]
ArchivalMemoryDep = Annotated[ArchivalMemory, Depends(get_archival_memory)]
RecallMemoryDep = Annotated[RecallMemory, Depends(get_recall_memory)]
