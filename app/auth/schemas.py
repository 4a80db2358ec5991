import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from app.request_body import RequestBody


class TenantCreate(RequestBody):
    name: str = Field(min_length=1, max_length=200)


class TenantRead(BaseModel):
    id: uuid.UUID
    name: str
    created_at: datetime


class KeyCreate(RequestBody):
    name: str = Field(default="default", min_length=1, max_length=200, description="a label to tell keys apart")


class KeyRead(BaseModel):
    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    prefix: str = Field(description="the first characters of the key")
    created_at: datetime
    revoked_at: datetime | None


class IssuedKeyRead(KeyRead):
    key: str = Field(description="the API key itself; shown only in this response")
