"""Who is calling: a tenant (by API key), the operator (admin key), or — only while no key exists at all — a
loopback client acting for the default tenant. Keys come from `Authorization: Bearer <key>` or `X-API-Key`,
never from a query string (those end up in access logs)."""

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.auth.keys import key_limits, same_secret
from app.auth.models import DEFAULT_TENANT_ID
from app.auth.repository import KeyRepository
from app.errors import EngramError
from app.quotas.service import Limits

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
KEYS_EXIST_TTL_SECONDS = 5.0


class Unauthorized(EngramError):
    status_code = 401
    code = "unauthorized"
    headers = {"WWW-Authenticate": "Bearer"}


class Forbidden(EngramError):
    status_code = 403
    code = "forbidden"


@dataclass(frozen=True)
class Principal:
    tenant_id: uuid.UUID
    admin: bool = False
    key_id: uuid.UUID | None = None
    key_limits: Limits = Limits()  # the key's own quotas (app/quotas)


def require_tenant(principal: Principal) -> Principal:
    if principal.admin:
        raise Forbidden("the admin key manages tenants and keys; use a tenant's API key for agents")
    return principal


def presented_key(authorization: str | None, x_api_key: str | None) -> str | None:
    if x_api_key:
        return x_api_key.strip()
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return None


class Authenticator:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], admin_key: str | None):
        self._sessions = sessions
        self._admin_key = admin_key
        self._keys_exist: tuple[bool, float] = (False, 0.0)

    async def keys_configured(self) -> bool:
        if self._admin_key:
            return True
        known, checked_at = self._keys_exist
        if known or time.monotonic() - checked_at < KEYS_EXIST_TTL_SECONDS:
            return known
        async with self._sessions() as session:
            known = await KeyRepository(session).any_active()
        self._keys_exist = (known, time.monotonic())
        return known

    def key_created(self) -> None:
        self._keys_exist = (True, time.monotonic())

    async def authenticate(self, key: str | None, client_host: str | None) -> Principal:
        if key:
            if self._admin_key and same_secret(key, self._admin_key):
                return Principal(DEFAULT_TENANT_ID, admin=True)
            async with self._sessions() as session:
                record = await KeyRepository(session).active(key)
            if record is not None:
                return Principal(record.tenant_id, key_id=record.id, key_limits=key_limits(record))
            if await self.keys_configured():
                raise Unauthorized("the API key is invalid or revoked")
            # No keys exist yet: a key stands for nothing (OpenAI clients always send one), loopback decides.
        elif await self.keys_configured():
            raise Unauthorized("an API key is required: send `Authorization: Bearer <key>` or `X-API-Key: <key>`")
        if client_host not in LOOPBACK_HOSTS:
            raise Forbidden(
                "no API keys are configured, so only loopback clients are served: set ENGRAM_ADMIN_KEY and create "
                "keys (POST /v1/admin/tenants/{id}/keys or `engram keys create`)"
            )
        return Principal(DEFAULT_TENANT_ID)
