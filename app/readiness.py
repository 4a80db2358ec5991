"""What the first requests after a start would otherwise compute, computed before `/readyz` answers ready (issue 54):
the recollection gate's baseline embeds its cohorts of ~70 fixed texts once per process (app/memory/search/baseline.py),
and the local model's threads pay their first calls. The warm-up does both as the service starts, beside the
migrations and the rest of the start-up:

- the cohorts (`recollection.ready`), on the embedder's query lane and its lane for long passages. A local model
  embeds the 40 questions together, in one pass of its query lane (`_Batches`), the same vectors bit for bit: one by
  one, on cores shared with other work, each call's OpenMP barriers wait for threads the other work has descheduled;
- one short passage, the lane of a turn's message vectors;
- the database, on the few pooled connections the first requests take (the pool hands out the most recently used
  first): a new backend's first search loads the catalog of the tables' partitions and their indexes, pgvector's
  library, and asyncpg prepares the statements; SQLAlchemy compiles them once per process.

The start waits for it up to WAIT_SECONDS, then listens anyway. Until it has succeeded `/readyz` answers 503 with
what it waits for; an embedder that fails (a remote endpoint that is down) leaves the service up and not ready, the
reason in `/readyz`, and the warm-up is tried again every RETRY_SECONDS (the requests that need no embedder are
served meanwhile). Nothing waits for an LLM: a configured endpoint is not asked before the first turn, and the
offline demo model is loaded before the service listens; what its first turn costs is the agent's whole prompt
evaluated, which llama.cpp keeps for the last prompt only: a cost of which agent spoke last, not of the start."""

import asyncio
import logging
import uuid
from contextlib import AsyncExitStack, suppress

from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.service import find_agent
from app.db import reading
from app.errors import NotFound
from app.llm.embeddings import Embedder
from app.llm.embeddings.prepared import PreparedEmbedder
from app.memory.core.service import CoreMemory
from app.memory.kinds import SEARCHABLE, Scope
from app.memory.recollection.recollector import ready as recollection_ready
from app.memory.search.baseline import GENERAL_QUESTIONS, PERSONAL_QUESTIONS, cohorts_embedded
from app.memory.search.query import SearchQuery

log = logging.getLogger("engram")

# How long the start waits for the warm-up before it listens (not ready) and lets it go on in the background: the
# local model takes ~1-4 s on 2 cores; an endpoint that hangs would take its client's whole timeout.
WAIT_SECONDS = 30.0
# Between attempts after a failure (the last one repeated): a remote embedder that comes back is noticed soon.
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0)
SHORT_PASSAGE = "Engram is starting."
# Pooled connections warmed at the start: a recollection reads on two at once, a turn on up to three.
WARM_CONNECTIONS = 3
SEARCHED = 30  # as many hits as a recollection asks for


class Warmup:
    """The warm-up of one start, in a task of its own from `start()` to `stop()`. `problem`: why the service is not
    ready yet (None once warmed up)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.problem: str | None = "warming up: embedding the recollection gate's cohorts"
        self.attempts = 0
        self._tried = asyncio.Event()  # the first attempt is over, done or failed
        self._task: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        return self.problem is None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="engram-warmup")

    async def first_attempt(self) -> None:
        """Until the first attempt is over (done or failed), or WAIT_SECONDS."""
        with suppress(TimeoutError):
            async with asyncio.timeout(WAIT_SECONDS):
                await self._tried.wait()
        if not self.done:
            log.warning("not ready yet, serving meanwhile (/readyz says why): %s", self.problem)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            self.attempts += 1
            try:
                await self._warm()
            except Exception as exc:  # an embedder's failure, whatever its kind: tried again, the reason kept
                self.problem = f"embedder unavailable, retrying: {type(exc).__name__}: {exc}"
                log.warning("warm-up failed (attempt %d): %s", self.attempts, self.problem)
                self._tried.set()
                await asyncio.sleep(RETRY_SECONDS[min(self.attempts, len(RETRY_SECONDS)) - 1])
                continue
            self.problem = None
            self._tried.set()
            if self.attempts > 1:
                log.info("warmed up after %d attempts: ready", self.attempts)
            return

    async def _warm(self) -> None:
        embedder: Embedder = self.embedder
        if not embedder.symmetric and not cohorts_embedded(
            embedder
        ):  # a symmetric one (an endpoint) embeds each cohort in one request already
            questions = list(dict.fromkeys(PERSONAL_QUESTIONS + GENERAL_QUESTIONS))
            prepared = PreparedEmbedder(embedder)
            vectors = await asyncio.gather(*(embedder.embed_query(question) for question in questions))
            prepared.vectors.update((prepared.key("query", q), v) for q, v in zip(questions, vectors, strict=True))
            embedder = prepared  # the baseline's questions answered from these; stored for the model it wraps
        await recollection_ready(embedder)
        await self.embedder.embed_passages([SHORT_PASSAGE])


async def warm_database(
    sessions: async_sessionmaker[AsyncSession], embedder: Embedder, connections: int = WARM_CONNECTIONS
) -> None:
    """The reads of a recollection (the agent's lookup, its core memory, both searches), on `connections` pooled
    connections held at once (so that each is another backend), for an agent that does not exist, with any vector
    (the embedder is not asked); then an EXPLAIN over each partitioned table, which opens every partition and its
    indexes. Reads only; a failure is logged, and readiness checks the database itself."""
    vector = [1.0] + [0.0] * (embedder.dim - 1)
    query = SearchQuery("Engram is starting", k=SEARCHED)

    async def warm(session: AsyncSession) -> None:
        nobody = uuid.uuid4()
        with suppress(NotFound):  # the lookup every request about an agent makes
            await find_agent(session, nobody, tenant_id=None)
        await CoreMemory(session).blocks_of(nobody)
        for kind in SEARCHABLE:
            await kind.search(session, embedder, nobody, query, vector, Scope())
        for kind in SEARCHABLE:
            await session.execute(text(f"EXPLAIN SELECT 1 FROM {kind.table}"))

    try:
        async with AsyncExitStack() as held:
            held_sessions = [await held.enter_async_context(reading(sessions)) for _ in range(connections)]
            await asyncio.gather(*(warm(session) for session in held_sessions))
    except Exception:  # the warm-up of a database that fails now: readiness says so
        log.warning("could not warm the database's connections up", exc_info=True)
