"""The bodies and query parameters of the requests, as the routes declare them (tests/clients/python/test_contract.py
holds each to openapi.json). Fields left None are not sent."""

from typing import Literal
from uuid import UUID

from pydantic import BaseModel

from engram_client.inputs import ConversationLine, Instant, NewBlock, NewMessage, NewPassage

Kind = Literal["archival", "recall"]


class AgentCreate(BaseModel):
    name: str
    system: str | None = None
    blocks: list[NewBlock] | None = None
    model: str | None = None


class AgentUpdate(BaseModel):
    name: str | None = None
    system: str | None = None
    model: str | None = None


class AgentsQuery(BaseModel):
    limit: int | None = None
    cursor: str | None = None
    name: str | None = None


class AsOf(BaseModel):
    as_of: Instant | None = None


class BlockWrite(BaseModel):
    value: str
    limit: int | None = None
    description: str | None = None
    read_only: bool | None = None


class ArchivalQuery(BaseModel):
    query: str | None = None
    k: int | None = None
    min_score: float | None = None
    mode: Literal["hybrid", "vector", "text"] | None = None
    tags: list[str] | None = None
    after: Instant | None = None
    before: Instant | None = None
    as_of: Instant | None = None
    include_superseded: bool | None = None
    limit: int | None = None
    cursor: str | None = None


class PassageBatch(BaseModel):
    items: list[NewPassage]


class PassageWrite(BaseModel):
    """A passage's successor (supersede), or the passage a key is to hold (put_key)."""

    content: str
    tags: list[str] | None = None
    occurred_at: Instant | None = None
    sources: list[UUID] | None = None


class HandIn(BaseModel):
    messages: list[NewMessage]
    memory_pass: bool


class MessagesQuery(BaseModel):
    query: str | None = None
    limit: int | None = None
    after: Instant | None = None
    before: Instant | None = None
    cursor: str | None = None
    include_context: bool | None = None


class RecollectionRequest(BaseModel):
    query: str | None = None
    messages: list[ConversationLine] | None = None
    max_chars: int | None = None
    include_core: bool | None = None
    core_blocks: list[str] | None = None
    can_search: bool | None = None
    as_of: Instant | None = None
    kinds: list[Kind] | None = None
    tags: list[str] | None = None


class ChatRequest(BaseModel):
    message: str


class ChatQuery(BaseModel):
    deltas: bool


class ExportQuery(BaseModel):
    embeddings: bool


class ImportQuery(BaseModel):
    name: str | None = None
