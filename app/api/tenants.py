"""Operator endpoints (admin key): tenants and their API keys."""

import uuid

from fastapi import APIRouter, Request, Response

from app.api.deps import AdminDep, SessionDep
from app.auth.keys import KeyRepository
from app.auth.models import ApiKey
from app.auth.schemas import IssuedKeyRead, KeyCreate, KeyRead, TenantCreate, TenantRead
from app.errors import ERROR_RESPONSES
from app.pagination import Page
from app.runtime import runtime

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ERROR_RESPONSES)


def key_read(record: ApiKey) -> KeyRead:
    return KeyRead(
        id=record.id,
        tenant_id=record.tenant_id,
        name=record.name,
        prefix=record.prefix,
        created_at=record.created_at,
        revoked_at=record.revoked_at,
    )


@router.post("/tenants", status_code=201)
async def create_tenant(body: TenantCreate, session: SessionDep, _: AdminDep) -> TenantRead:
    """Create a tenant: the owner of agents, reached with its own API keys."""
    tenant = await KeyRepository(session).create_tenant(body.name)
    return TenantRead(id=tenant.id, name=tenant.name, created_at=tenant.created_at)


@router.get("/tenants")
async def list_tenants(session: SessionDep, _: AdminDep) -> Page[TenantRead]:
    """Every tenant."""
    tenants = await KeyRepository(session).tenants()
    return Page[TenantRead](items=[TenantRead(id=t.id, name=t.name, created_at=t.created_at) for t in tenants])


@router.post("/tenants/{tenant_id}/keys", status_code=201)
async def create_key(tenant_id: uuid.UUID, body: KeyCreate, session: SessionDep, request: Request, _: AdminDep) -> IssuedKeyRead:
    """Issue an API key for a tenant. The key is in this response only; Engram keeps just its hash."""
    issued = await KeyRepository(session).issue(tenant_id, body.name)
    runtime(request.app).authenticator.key_created()
    return IssuedKeyRead(**key_read(issued.record).model_dump(), key=issued.key)


@router.get("/tenants/{tenant_id}/keys")
async def list_keys(tenant_id: uuid.UUID, session: SessionDep, _: AdminDep) -> Page[KeyRead]:
    """A tenant's keys (never the keys themselves)."""
    keys = KeyRepository(session)
    await keys.tenant(tenant_id)
    return Page[KeyRead](items=[key_read(k) for k in await keys.keys(tenant_id)])


@router.delete("/keys/{key_id}", status_code=204)
async def revoke_key(key_id: uuid.UUID, session: SessionDep, _: AdminDep) -> Response:
    """Revoke a key: it stops working at once, on every replica."""
    await KeyRepository(session).revoke(key_id)
    return Response(status_code=204)
