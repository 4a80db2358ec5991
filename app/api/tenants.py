"""Operator endpoints (admin key): tenants, their API keys, and their use of quotas."""

import uuid

from fastapi import APIRouter, Request, Response

from app.api.deps import AdminDep, SessionDep
from app.api.errors import ERROR_RESPONSES
from app.auth.schemas import IssuedKeyRead, KeyCreate, KeyLimitsUpdate, KeyRead, TenantCreate, TenantRead
from app.auth.service import KeyService
from app.pagination import Page
from app.quotas.schemas import TenantUsageRead
from app.runtime import runtime

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ERROR_RESPONSES)


@router.post("/tenants", status_code=201)
async def create_tenant(body: TenantCreate, session: SessionDep, _: AdminDep) -> TenantRead:
    """Create a tenant: the owner of agents, reached with its own API keys."""
    tenant = await KeyService(session).create_tenant(body.name)
    return TenantRead.of(tenant)


@router.get("/tenants")
async def list_tenants(session: SessionDep, _: AdminDep) -> Page[TenantRead]:
    """Every tenant."""
    tenants = await KeyService(session).tenants()
    return Page[TenantRead](items=[TenantRead.of(t) for t in tenants])


@router.post("/tenants/{tenant_id}/keys", status_code=201)
async def create_key(tenant_id: uuid.UUID, body: KeyCreate, session: SessionDep, request: Request, _: AdminDep) -> IssuedKeyRead:
    """Issue an API key for a tenant, with optional quotas of its own. The key is in this response only; Engram keeps
    just its hash."""
    issued = await KeyService(session).issue(tenant_id, body.name, body.limits())
    runtime(request.app).authenticator.key_created()
    return IssuedKeyRead.of(issued.record, key=issued.key)


@router.get("/tenants/{tenant_id}/keys")
async def list_keys(tenant_id: uuid.UUID, session: SessionDep, _: AdminDep) -> Page[KeyRead]:
    """A tenant's keys (never the keys themselves)."""
    return Page[KeyRead](items=[KeyRead.of(k) for k in await KeyService(session).keys(tenant_id)])


@router.patch("/keys/{key_id}")
async def update_key_limits(key_id: uuid.UUID, body: KeyLimitsUpdate, session: SessionDep, _: AdminDep) -> KeyRead:
    """Change a key's own quotas (null removes one); they apply from the key's next request, on every replica."""
    return KeyRead.of(await KeyService(session).update_limits(key_id, body.model_dump(exclude_unset=True)))


@router.delete("/keys/{key_id}", status_code=204)
async def revoke_key(key_id: uuid.UUID, session: SessionDep, _: AdminDep) -> Response:
    """Revoke a key: it stops working at once, on every replica."""
    await KeyService(session).revoke(key_id)
    return Response(status_code=204)


@router.get("/usage")
async def usage(session: SessionDep, request: Request, _: AdminDep) -> Page[TenantUsageRead]:
    """Each tenant's use against its quotas: requests and chat turns this minute, LLM tokens today (UTC). Use is
    counted while tenant quotas are on (ENGRAM_QUOTA_*)."""
    tenants = [(t.id, t.name) for t in await KeyService(session).tenants()]
    return Page[TenantUsageRead](items=await runtime(request.app).quotas.tenant_usage(session, tenants))
