"""The searchable kinds of memory, each described once: archival passages and recall messages. A kind is a table of
per-agent rows that the hybrid search ranks (its repository hands app/memory/search/hybrid.py its search shape), that
get own vector indexes for the largest agents, whose vectors `engram reembed` moves, whose hits recollection hands
over and the agent's tools quote. What those do differently per kind is read from its entry here, so that adding a
kind touches its own package, its table and one entry (docs/development.md, "Adding a memory kind").

The search sits below the kinds' packages and knows no kind; this registry sits above them, and reads each kind
through its service."""

import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal

from sqlmodel.ext.asyncio.session import AsyncSession

from app.llm.embeddings import Embedder
from app.memory.archival.service import ArchivalMemory
from app.memory.archival.validity import CURRENT, Validity
from app.memory.models import ArchivalPassage, Message
from app.memory.recall.service import RecallMemory
from app.memory.search.hybrid import Hit, Row
from app.memory.search.query import SearchQuery
from app.models_base import table_of

Kind = Literal["archival", "recall"]


@dataclass(frozen=True)
class Scope:
    """What a recollection asks of each kind it searches: memory as it stood `as_of` (None: now), messages said
    before `below_seq` (the context's start; handed-in ones wherever they are), passages carrying all of `tags`."""

    as_of: datetime | None = None
    below_seq: int | None = None
    tags: list[str] | None = None


class SearchableKind(ABC, Generic[Row]):
    """A kind's name (as the API and recollection name it), its table model, its rows as a count names them
    (`noun`), the label of its heading in a recollection (None: the day alone), the columns its `text` reads,
    which of its rows carry a vector (SQL over its table; None: every one) and whether its vector column is
    NOT NULL (lifted while `engram reembed` runs)."""

    name: Kind
    model: type[Row]
    noun: str
    heading: str | None
    text_columns: tuple[str, ...]
    embedded: str | None
    vector_required: bool

    @property
    def table(self) -> str:
        return table_of(self.model).name

    @abstractmethod
    def text(self, row: Row) -> str:
        """What the row says: what is embedded, and what recollection shows."""

    def text_of(self, columns: Mapping[str, Any]) -> str:
        """`text` of a row read as its `text_columns` alone (re-embedding reads no more)."""
        return self.text(self.model(**columns))

    def speaker(self, row: Row) -> str | None:
        """Who said it, as a recollection's line names them (None: no one)."""
        return None

    @abstractmethod
    def written(self, row: Row) -> float:
        """Where the row stands among the agent's rows of its kind, in the order they were written."""

    def sources(self, row: Row) -> tuple[uuid.UUID, ...]:
        """What it was drawn from (a fact's messages and passages)."""
        return ()

    @abstractmethod
    def quoted(self, row: Row, chars: int | None = None) -> str:
        """The row as the agent's tools list it, its text cut to `chars` (None: whole)."""

    @abstractmethod
    async def search(
        self,
        session: AsyncSession,
        embedder: Embedder,
        agent_id: uuid.UUID,
        query: SearchQuery,
        vector: list[float],
        scope: Scope,
    ) -> list[tuple[Row, Hit]]:
        """The agent's rows for `query` (its vector given) within `scope`, best first, as recollection reads them."""


class ArchivalKind(SearchableKind[ArchivalPassage]):
    name = "archival"
    model = ArchivalPassage
    noun = "passages"
    heading = None  # archival memory is most of what is recollected: its name on every day's heading costs room
    text_columns = ("content",)
    embedded = None
    vector_required = True

    def text(self, row: ArchivalPassage) -> str:
        return row.content

    def written(self, row: ArchivalPassage) -> float:
        return row.created_at.timestamp()

    def sources(self, row: ArchivalPassage) -> tuple[uuid.UUID, ...]:
        return tuple(row.sources)

    def quoted(self, row: ArchivalPassage, chars: int | None = None) -> str:
        return f"- id {row.id} [{row.occurred_at:%Y-%m-%d}] {row.content[:chars]}"

    async def search(
        self,
        session: AsyncSession,
        embedder: Embedder,
        agent_id: uuid.UUID,
        query: SearchQuery,
        vector: list[float],
        scope: Scope,
    ) -> list[tuple[ArchivalPassage, Hit]]:
        validity = Validity(as_of=scope.as_of) if scope.as_of else CURRENT
        return await ArchivalMemory(session, embedder).search(agent_id, query, tags=scope.tags, vector=vector, validity=validity)


class RecallKind(SearchableKind[Message]):
    name = "recall"
    model = Message
    noun = "messages"
    heading = "conversation"
    text_columns = ("content", "tool_calls")
    embedded = "role IN ('user', 'assistant') AND search_text <> ''"
    vector_required = False

    def text(self, row: Message) -> str:
        return row.recall_text()

    def speaker(self, row: Message) -> str | None:
        return row.role

    def written(self, row: Message) -> float:
        return float(row.seq or 0)

    def quoted(self, row: Message, chars: int | None = None) -> str:
        """As conversation_search quotes a message (erasing the message erases its quotes: app/chat/forgetting.py)
        and a memory pass's transcript shows it."""
        return f"[{row.occurred_at:%Y-%m-%d %H:%M}] {row.role}: {row.recall_text()[:chars]}"

    async def search(
        self,
        session: AsyncSession,
        embedder: Embedder,
        agent_id: uuid.UUID,
        query: SearchQuery,
        vector: list[float],
        scope: Scope,
    ) -> list[tuple[Message, Hit]]:
        return await RecallMemory(session, embedder).search(
            agent_id, query, below_seq=scope.below_seq, vector=vector, as_of=scope.as_of
        )


ARCHIVAL, RECALL = ArchivalKind(), RecallKind()
SEARCHABLE: tuple[SearchableKind[Any], ...] = (ARCHIVAL, RECALL)
KINDS: tuple[Kind, ...] = tuple(kind.name for kind in SEARCHABLE)
TABLES = tuple(kind.table for kind in SEARCHABLE)
BY_NAME: dict[Kind, SearchableKind[Any]] = {kind.name: kind for kind in SEARCHABLE}
