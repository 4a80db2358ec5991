"""Tenants and their API keys as the operator manages them (the admin endpoints, `engram keys`)."""

import uuid
from collections.abc import Sequence
from dataclasses import replace

from sqlmodel.ext.asyncio.session import AsyncSession

from app.auth.keys import KEY_PREFIX, IssuedKey, hash_key, key_limits, new_key, set_limits
from app.auth.models import ApiKey, Tenant
from app.auth.repository import KeyRepository
from app.errors import NotFound
from app.models_base import utcnow
from app.quotas.service import Limits


class KeyService:
    def __init__(self, session: AsyncSession):
        self.rows = KeyRepository(session)

    async def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(name=name)
        await self.rows.add(tenant)
        return tenant

    async def tenants(self) -> Sequence[Tenant]:
        return await self.rows.tenants()

    async def tenant(self, tenant_id: uuid.UUID) -> Tenant:
        tenant = await self.rows.tenant(tenant_id)
        if tenant is None:
            raise NotFound(f"no tenant {tenant_id}")
        return tenant

    async def issue(self, tenant_id: uuid.UUID, name: str, limits: Limits | None = None) -> IssuedKey:
        await self.tenant(tenant_id)
        key = new_key()
        record = ApiKey(tenant_id=tenant_id, name=name, prefix=key[: len(KEY_PREFIX) + 6], key_hash=hash_key(key))
        set_limits(record, limits or Limits())
        await self.rows.add(record)
        return IssuedKey(record, key)

    async def keys(self, tenant_id: uuid.UUID) -> Sequence[ApiKey]:
        """A tenant's keys (404 for an unknown tenant)."""
        await self.tenant(tenant_id)
        return await self.rows.keys(tenant_id)

    async def key(self, key_id: uuid.UUID) -> ApiKey:
        record = await self.rows.key(key_id)
        if record is None:
            raise NotFound(f"no API key {key_id}")
        return record

    async def update_limits(self, key_id: uuid.UUID, changes: dict[str, int | None]) -> ApiKey:
        """Replace the limits named in `changes` (None removes one); the others stay."""
        record = await self.key(key_id)
        set_limits(record, replace(key_limits(record), **changes))
        await self.rows.add(record)
        return record

    async def revoke(self, key_id: uuid.UUID) -> ApiKey:
        record = await self.key(key_id)
        record.revoked_at = record.revoked_at or utcnow()
        await self.rows.add(record)
        return record
