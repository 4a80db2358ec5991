import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from app.quotas.service import Limits
from app.read_model import ReadModel
from app.request_body import RequestBody


class TenantCreate(RequestBody):
    name: str = Field(min_length=1, max_length=200)


class TenantRead(ReadModel):
    id: uuid.UUID
    name: str
    created_at: datetime


class KeyLimits(BaseModel):
    """A key's own quotas, on top of its tenant's (ENGRAM_QUOTA_*); null: only the tenant's apply."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    turns_per_minute: int | None = Field(default=None, ge=1)
    llm_tokens_per_day: int | None = Field(default=None, ge=1)

    def limits(self) -> Limits:
        return Limits(self.requests_per_minute, self.turns_per_minute, self.llm_tokens_per_day)


class KeyCreate(KeyLimits, RequestBody):
    name: str = Field(default="default", min_length=1, max_length=200, description="a label to tell keys apart")


class KeyLimitsUpdate(KeyLimits, RequestBody):
    """The fields given replace the key's limits (null removes one); the others stay."""


class KeyRead(KeyLimits, ReadModel):
    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    prefix: str = Field(description="the first characters of the key")
    created_at: datetime
    revoked_at: datetime | None


class IssuedKeyRead(KeyRead):
    key: str = Field(description="the API key itself; shown only in this response")
