"""What the lifespan builds and every request uses, behind one typed accessor (instead of untyped reads of
`app.state`)."""

from dataclasses import dataclass
from functools import cached_property

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from starlette.applications import Starlette

from app.auth.principal import Authenticator
from app.delivery.stream import TurnStreams
from app.llm.embeddings import Embedder
from app.memory.archival.imports import ImportWorker
from app.quotas.service import Limits, Quotas
from app.replicas import ReadReplicas
from app.settings import Settings


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    embedder: Embedder
    authenticator: Authenticator
    turn_streams: TurnStreams
    imports: ImportWorker
    replicas: ReadReplicas | None = None  # ENGRAM_DATABASE_REPLICA_URLS

    @cached_property
    def quotas(self) -> Quotas:
        return Quotas(self.sessions, Limits.from_settings(self.settings))


def runtime(app: Starlette) -> Runtime:
    state: Runtime = app.state.runtime
    return state
