import uuid
from datetime import datetime

from pydantic import Field, field_validator

from app.memory.schemas import MAX_BLOCKS, BlockCreate, BlockRead
from app.read_model import ReadModel
from app.request_body import RequestBody

DEFAULT_PERSONA = (
    "I am Engram, a thoughtful assistant with a long-term memory. I remember what people tell me, keep what matters "
    "in my core memory, and look things up in my archival and conversation memory before I answer from guesswork."
)


def default_blocks() -> list[BlockCreate]:
    return [
        BlockCreate(label="persona", value=DEFAULT_PERSONA, description="Who you are: your persona and how you behave."),
        BlockCreate(
            label="human", value="", description="Key facts about the person you talk with: name, preferences, situation."
        ),
    ]


class AgentCreate(RequestBody):
    name: str = Field(min_length=1, max_length=200)
    system: str | None = Field(default=None, max_length=20_000, description="extra instructions added to the system prompt")
    blocks: list[BlockCreate] | None = Field(
        default=None, max_length=MAX_BLOCKS, description="core memory blocks; default persona + human"
    )
    model: str | None = Field(default=None, max_length=200, description="chat model; default ENGRAM_LLM_MODEL")

    @field_validator("blocks")
    @classmethod
    def _unique_labels(cls, blocks: list[BlockCreate] | None) -> list[BlockCreate] | None:
        if blocks is not None and len({b.label for b in blocks}) != len(blocks):
            raise ValueError("block labels must be unique")
        return blocks


class AgentUpdate(RequestBody):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    system: str | None = Field(default=None, max_length=20_000)
    model: str | None = Field(default=None, max_length=200)


class AgentRead(ReadModel):
    id: uuid.UUID
    name: str
    system: str | None
    model: str | None
    created_at: datetime
    updated_at: datetime
    blocks: list[BlockRead]
