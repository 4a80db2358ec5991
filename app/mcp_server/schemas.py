"""What the MCP tools answer: structured results, described to the client by their JSON schema."""

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.chat.events import StopReason
from app.memory.schemas import BlockRead, PassageRead
from app.read_model import ReadModel


class AgentSummary(BaseModel):
    id: uuid.UUID
    name: str
    created_at: datetime


class AgentList(BaseModel):
    agents: list[AgentSummary]


class CoreMemoryBlocks(BaseModel):
    blocks: list[BlockRead]


class PassageList(BaseModel):
    passages: list[PassageRead]


class ConversationHit(ReadModel):
    id: uuid.UUID = Field(description="the message's id (what a passage drawn from it names among its sources)")
    role: Literal["user", "assistant", "tool", "system"]
    content: str
    created_at: datetime
    turn_id: uuid.UUID | None
    score: float = Field(description="relevance, 0..1")


class ConversationHits(BaseModel):
    messages: list[ConversationHit]


class ChatReply(BaseModel):
    reply: str = Field(description="what the agent said to the user (its send_message texts)")
    turn_id: uuid.UUID
    stop_reason: StopReason | None = Field(description="end_turn: a normal reply; anything else: the turn was cut short")
