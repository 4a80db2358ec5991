"""Letta's shapes of agents, blocks and passages, as the SDK sends and parses them. Requests accept every field of
Letta's (`extra="ignore"`): the ones Engram has a use for are declared, the rest are accepted and ignored (docs/letta.md
lists them). Responses carry the fields the SDK's models require, from Engram's rows."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.agents.models import Agent
from app.agents.schemas import AgentRead
from app.letta_api.common import letta_id
from app.memory.models import ArchivalPassage, MemoryBlock
from app.memory.schemas import LABEL_PATTERN, MAX_BLOCK_LIMIT, MAX_BLOCKS, MAX_PASSAGE_CHARS, MAX_TAGS, Instant
from app.request_body import StorableBody


class LettaRequest(StorableBody):
    model_config = ConfigDict(extra="ignore")


class LettaBlockCreate(LettaRequest):
    label: str = Field(pattern=LABEL_PATTERN, description="a lower-case identifier (Engram's rule), e.g. `human`")
    value: str = ""
    limit: int | None = Field(default=None, ge=1, le=MAX_BLOCK_LIMIT, description="default: Engram's, or the value's length")
    description: str | None = Field(default=None, max_length=1000)
    read_only: bool = False


class LettaAgentCreate(LettaRequest):
    name: str | None = Field(default=None, min_length=1, max_length=200, description="default: a generated name")
    system: str | None = Field(default=None, max_length=20_000, description="the agent's own instructions")
    memory_blocks: list[LettaBlockCreate] | None = Field(default=None, max_length=MAX_BLOCKS)
    block_ids: list[str] | None = Field(default=None, description="not supported: Engram's blocks belong to one agent")


class LettaAgentUpdate(LettaRequest):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    system: str | None = Field(default=None, max_length=20_000)
    block_ids: list[str] | None = Field(default=None, description="not supported: Engram's blocks belong to one agent")


class LettaBlockUpdate(LettaRequest):
    value: str | None = None
    limit: int | None = Field(default=None, ge=1, le=MAX_BLOCK_LIMIT)
    description: str | None = Field(default=None, max_length=1000)
    read_only: bool | None = None
    label: str | None = Field(default=None, description="renaming a block is not supported: the same label, or none")


class LettaPassageCreate(LettaRequest):
    text: str = Field(min_length=1, max_length=MAX_PASSAGE_CHARS)
    tags: list[str] | None = Field(default=None, max_length=MAX_TAGS)
    created_at: Instant | None = Field(default=None, description="when it happened (Engram's occurred_at); default: now")


class LettaLlmConfig(BaseModel):
    model: str
    model_endpoint_type: Literal["openai"] = "openai"
    context_window: int
    handle: str


class LettaEmbeddingConfig(BaseModel):
    embedding_model: str
    embedding_endpoint_type: Literal["openai"] = "openai"
    embedding_dim: int
    handle: str


class LettaBlock(BaseModel):
    id: str
    label: str
    value: str
    limit: int
    description: str | None
    read_only: bool
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, block: MemoryBlock) -> "LettaBlock":
        return cls(
            id=letta_id("block", block.id),
            label=block.label,
            value=block.value,
            limit=block.char_limit,
            description=block.description,
            read_only=block.read_only,
        )


class LettaMemory(BaseModel):
    blocks: list[LettaBlock]


class LettaTool(BaseModel):
    id: str
    name: str
    description: str
    json_schema: dict[str, Any]
    tool_type: Literal["letta_core"] = "letta_core"


class LettaAgentState(BaseModel):
    id: str
    name: str
    agent_type: Literal["memgpt_agent"] = "memgpt_agent"
    system: str = Field(description="the agent's own instructions (Engram adds them to its system prompt)")
    model: str = Field(description="the model that serves the agent")
    llm_config: LettaLlmConfig
    embedding: str
    embedding_config: LettaEmbeddingConfig
    memory: LettaMemory
    blocks: list[LettaBlock]
    tools: list[LettaTool]
    sources: list[Any] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list, description="always empty: Engram's agents carry no tags")
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(
        cls,
        agent: Agent | AgentRead,
        blocks: list[LettaBlock],
        tools: list[LettaTool],
        *,
        model: str,
        context_window: int,
        embedding: LettaEmbeddingConfig,
    ) -> "LettaAgentState":
        return cls(
            id=letta_id("agent", agent.id),
            name=agent.name,
            system=agent.system or "",
            model=model,
            llm_config=LettaLlmConfig(model=model, context_window=context_window, handle=model),
            embedding=embedding.handle,
            embedding_config=embedding,
            memory=LettaMemory(blocks=blocks),
            blocks=blocks,
            tools=tools,
            created_at=agent.created_at,
            updated_at=agent.updated_at,
        )


class LettaPassage(BaseModel):
    id: str
    text: str
    tags: list[str]
    created_at: datetime = Field(description="when it happened (Engram's occurred_at)")
    updated_at: datetime = Field(description="when it was stored")
    embedding: None = None
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="`sources`: Engram's ids of the messages and passages it was distilled from, when it has any",
    )

    @classmethod
    def of(cls, passage: ArchivalPassage) -> "LettaPassage":
        return cls(
            id=letta_id("passage", passage.id),
            text=passage.content,
            tags=passage.tags,
            created_at=passage.occurred_at,
            updated_at=passage.created_at,
            metadata={"sources": [str(s) for s in passage.sources]} if passage.sources else {},
        )


class LettaSearchResult(BaseModel):
    id: str
    content: str
    timestamp: str = Field(description="when it happened (ISO 8601)")
    tags: list[str]


class LettaPassageSearchResponse(BaseModel):
    results: list[LettaSearchResult]
    count: int


class LettaImportedAgents(BaseModel):
    agent_ids: list[str]


class LettaDeleted(BaseModel):
    message: str


class LettaHealth(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
