"""SQL for tenants and their API keys."""

import uuid
from collections.abc import Sequence

from sqlalchemy import exists, select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.auth.keys import hash_key
from app.auth.models import ApiKey, Tenant


class KeyRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def add(self, row: Tenant | ApiKey) -> None:
        self.session.add(row)
        await self.session.flush()

    async def tenants(self) -> Sequence[Tenant]:
        return (await self.session.scalars(select(Tenant).order_by(col(Tenant.created_at)))).all()

    async def tenant(self, tenant_id: uuid.UUID) -> Tenant | None:
        return await self.session.get(Tenant, tenant_id)

    async def keys(self, tenant_id: uuid.UUID) -> Sequence[ApiKey]:
        query = select(ApiKey).where(col(ApiKey.tenant_id) == tenant_id).order_by(col(ApiKey.created_at))
        return (await self.session.scalars(query)).all()

    async def key(self, key_id: uuid.UUID) -> ApiKey | None:
        return await self.session.get(ApiKey, key_id)

    async def active(self, key: str) -> ApiKey | None:
        query = select(ApiKey).where(col(ApiKey.key_hash) == hash_key(key), col(ApiKey.revoked_at).is_(None))
        return (await self.session.scalars(query)).first()

    async def any_active(self) -> bool:
        return bool(await self.session.scalar(exists().where(col(ApiKey.revoked_at).is_(None)).select()))
