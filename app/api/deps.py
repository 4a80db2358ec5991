"""Request dependencies: one transaction per request, services built on it, and agent lookups that 404 once.
Every dependency is `async def`, even one that awaits nothing: FastAPI runs a plain `def` in its thread pool."""

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from sqlmodel.ext.asyncio.session import AsyncSession
from starlette.requests import HTTPConnection

from app.agents.models import Agent
from app.agents.service import find_agent
from app.api.replica_reads import REPLICA_FAILURES, only_reads, replica_failed, replica_for
from app.auth.principal import Forbidden, Principal, presented_key, require_tenant
from app.db import reading, transaction
from app.llm.embeddings import Embedder
from app.memory.archival.service import ArchivalMemory
from app.memory.core.service import CoreMemory
from app.memory.recall.service import RecallMemory
from app.memory.recollection.recollector import Recollector
from app.metrics import DB_READS
from app.quotas.headers import METER_STATE_KEY
from app.quotas.service import Meter
from app.runtime import Runtime, runtime
from app.settings import Settings


async def get_settings_dep(request: Request) -> Settings:
    return runtime(request.app).settings


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    state = runtime(request.app)
    if only_reads(request.scope):
        replica = replica_for(request.scope, state.replicas)
        request.state.reading_sessions = replica.sessions if replica else state.sessions  # for a second connection
        try:
            async with reading(request.state.reading_sessions) as session:
                yield session
                await session.commit()  # nothing to commit but what a handler added, flushed rather than dropped
        except REPLICA_FAILURES as exc:
            if replica is not None and state.replicas is not None:
                replica_failed(request.scope, state.replicas, replica, exc)
            raise
        DB_READS.labels("replica" if replica else "primary").inc()
        return
    # scope="function": the commit runs before the response is sent, so a failed commit is an error response.
    async with transaction(state.sessions) as session:
        yield session


async def get_embedder(request: Request) -> Embedder:
    return runtime(request.app).embedder


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
EmbedderDep = Annotated[Embedder, Depends(get_embedder)]


def connection_key(connection: HTTPConnection) -> str | None:
    return presented_key(connection.headers.get("authorization"), connection.headers.get("x-api-key"))


async def authenticate_connection(connection: HTTPConnection, key: str | None = None) -> Principal:
    """The one authentication of a request, WebSocket or MCP call: its key (by default the one in its headers) and
    the client's address."""
    client = connection.client.host if connection.client else None
    return await runtime(connection.app).authenticator.authenticate(key or connection_key(connection), client)


async def authenticate(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    x_api_key: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    return await authenticate_connection(request, presented_key(authorization, x_api_key))


async def tenant_principal(request: Request, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    principal = require_tenant(principal)
    await count_request(request, principal)
    return principal


def quota_meter(state: Runtime, principal: Principal) -> Meter:
    """The caller's use, counted, and its quotas."""
    return state.quotas.meter(principal.tenant_id, principal.key_id, principal.key_limits)


async def count_request(request: Request, principal: Principal) -> None:
    """Count the request against the caller's quotas (429 once one is used up); its response tells the standing.
    Once: a read run again on the primary (app/api/replica_reads.py) was counted by its first run."""
    if getattr(request.state, METER_STATE_KEY, None) is not None:
        return
    meter = quota_meter(runtime(request.app), principal)
    setattr(request.state, METER_STATE_KEY, meter)  # read by QuotaHeadersMiddleware, and by request_meter
    await meter.count_request()


async def admin_principal(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if not principal.admin:
        raise Forbidden("this needs the admin key (ENGRAM_ADMIN_KEY)")
    return principal


TenantDep = Annotated[Principal, Depends(tenant_principal)]
AdminDep = Annotated[Principal, Depends(admin_principal)]


async def request_meter(request: Request, _: TenantDep) -> Meter | None:
    """The meter that counted this request, for the turn it starts."""
    return getattr(request.state, METER_STATE_KEY, None)


MeterDep = Annotated[Meter | None, Depends(request_meter)]


async def valid_agent(agent_id: Annotated[uuid.UUID, Path()], session: SessionDep, principal: TenantDep) -> Agent:
    return await find_agent(session, agent_id, tenant_id=principal.tenant_id)


AgentDep = Annotated[Agent, Depends(valid_agent)]


async def existing_agent_id(agent_id: Annotated[uuid.UUID, Path()], request: Request, principal: TenantDep) -> uuid.UUID:
    """The agent, checked in a short session of its own: a request that runs a turn or embeds a batch must not hold a
    transaction open meanwhile."""
    async with runtime(request.app).sessions() as session:
        await find_agent(session, agent_id, tenant_id=principal.tenant_id)
    return agent_id


AgentIdDep = Annotated[uuid.UUID, Depends(existing_agent_id)]


async def get_core_memory(session: SessionDep) -> CoreMemory:
    return CoreMemory(session)


async def get_archival_memory(session: SessionDep, embedder: EmbedderDep) -> ArchivalMemory:
    return ArchivalMemory(session, embedder)


async def get_recall_memory(session: SessionDep, embedder: EmbedderDep) -> RecallMemory:
    return RecallMemory(session, embedder)


CoreMemoryDep = Annotated[CoreMemory, Depends(get_core_memory)]
ArchivalMemoryDep = Annotated[ArchivalMemory, Depends(get_archival_memory)]
RecallMemoryDep = Annotated[RecallMemory, Depends(get_recall_memory)]


async def get_recollector(request: Request, session: SessionDep, embedder: EmbedderDep) -> Recollector:
    # its second connection reads where the first does: on the request's replica, if it reads on one
    elsewhere = getattr(request.state, "reading_sessions", runtime(request.app).sessions)
    return Recollector(session, embedder, elsewhere=elsewhere)


RecollectorDep = Annotated[Recollector, Depends(get_recollector)]
