import uuid
from datetime import datetime

from pydantic import BaseModel, Field


class UsageRead(BaseModel):
    used: int
    limit: int | None = Field(description="the tenant's limit for this window (ENGRAM_QUOTA_*); null: none")
    window_start: datetime
    resets_at: datetime


class TenantUsageRead(BaseModel):
    tenant_id: uuid.UUID
    name: str
    requests: UsageRead = Field(description="HTTP requests in the current minute")
    turns: UsageRead = Field(description="chat turns started in the current minute")
    llm_tokens: UsageRead = Field(description="LLM tokens (prompt + completion) used today, UTC")
