"""API keys: random, shown once, stored only as a SHA-256 hash (a key has 256 bits of entropy, so a fast hash is
safe here; slow password hashes exist for low-entropy secrets)."""

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import exists, select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.auth.models import ApiKey, Tenant
from app.errors import NotFound
from app.models_base import utcnow
from app.quotas.service import Limits

KEY_PREFIX = "engk_"


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def same_secret(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def key_limits(record: ApiKey) -> Limits:
    return Limits(record.requests_per_minute, record.turns_per_minute, record.llm_tokens_per_day)


def set_limits(record: ApiKey, limits: Limits) -> None:
    record.requests_per_minute = limits.requests_per_minute
    record.turns_per_minute = limits.turns_per_minute
    record.llm_tokens_per_day = limits.llm_tokens_per_day


@dataclass
class IssuedKey:
    record: ApiKey
    key: str  # the only time the key itself exists outside the caller


class KeyRepository:
    def __init__(self, session: AsyncSession):
        self.session = session

    async def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(name=name)
        self.session.add(tenant)
        await self.session.flush()
        return tenant

    async def tenants(self) -> Sequence[Tenant]:
        return (await self.session.scalars(select(Tenant).order_by(col(Tenant.created_at)))).all()

    async def tenant(self, tenant_id: uuid.UUID) -> Tenant:
        tenant = await self.session.get(Tenant, tenant_id)
        if tenant is None:
            raise NotFound(f"no tenant {tenant_id}")
        return tenant

    async def issue(self, tenant_id: uuid.UUID, name: str, limits: Limits | None = None) -> IssuedKey:
        await self.tenant(tenant_id)
        key = new_key()
        record = ApiKey(tenant_id=tenant_id, name=name, prefix=key[: len(KEY_PREFIX) + 6], key_hash=hash_key(key))
        set_limits(record, limits or Limits())
        self.session.add(record)
        await self.session.flush()
        return IssuedKey(record, key)

    async def keys(self, tenant_id: uuid.UUID) -> Sequence[ApiKey]:
        query = select(ApiKey).where(col(ApiKey.tenant_id) == tenant_id).order_by(col(ApiKey.created_at))
        return (await self.session.scalars(query)).all()

    async def key(self, key_id: uuid.UUID) -> ApiKey:
        record = await self.session.get(ApiKey, key_id)
        if record is None:
            raise NotFound(f"no API key {key_id}")
        return record

    async def update_limits(self, key_id: uuid.UUID, changes: dict[str, int | None]) -> ApiKey:
        """Replace the limits named in `changes` (None removes one); the others stay."""
        record = await self.key(key_id)
        set_limits(record, replace(key_limits(record), **changes))
        self.session.add(record)
        await self.session.flush()
        return record

    async def revoke(self, key_id: uuid.UUID) -> ApiKey:
        record = await self.key(key_id)
        record.revoked_at = record.revoked_at or utcnow()
        self.session.add(record)
        await self.session.flush()
        return record

    async def active(self, key: str) -> ApiKey | None:
        query = select(ApiKey).where(col(ApiKey.key_hash) == hash_key(key), col(ApiKey.revoked_at).is_(None))
        return (await self.session.scalars(query)).first()

    async def any_active(self) -> bool:
        return bool(await self.session.scalar(exists().where(col(ApiKey.revoked_at).is_(None)).select()))
