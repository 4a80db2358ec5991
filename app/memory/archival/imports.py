"""Bulk imports into archival memory as jobs (POST …/archival/import): the request stores the items and answers at
once; a worker in every process stores them as passages, a slice at a time, while searches and turns go on.

A job is run by whichever process holds its advisory lock (one per job, on a connection of its own, released if the
process dies), so a job left `running` by a killed process is taken up again by the next start or by another
replica. Every slice is stored in one transaction that also deletes its items and counts them done: a crash loses at
most the slice in flight, which is stored again from the start, and no item is ever stored twice. The slice's
vectors are computed before that transaction, so a cancel waits for one database write, not for the embedder.

A slice that fails (the embedder or the database) is tried again later, RETRY_SECONDS after the first failure and
twice as long after each next one, while the worker goes on with the other jobs; after MAX_ATTEMPTS failures in a
row the job ends `failed`: what was stored stays, and `error` says from which item on nothing was. A slice the
embedding endpoint refuses (400, 413, 422) is sent again one item at a time, and the job fails at the item refused
on its own (an endpoint that refused the request's size alone lets every item through)."""

import asyncio
import logging
import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import ColumnElement, delete, func, insert, or_, text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import transaction
from app.errors import NotFound
from app.llm.embeddings import Embedder, EmbeddingRefused
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.models import ImportItem, ImportJob
from app.memory.schemas import ImportJobRead, PassageWrite
from app.models_base import utcnow

log = logging.getLogger("engram.imports")
PENDING = ("queued", "running")
SLICE = 32  # items embedded, then stored in one transaction (queries never wait for it: their own embedder lane)
INSERT_CHUNK = 5000  # items per INSERT when a job is created
POLL_SECONDS = 5.0  # how often an idle worker looks for jobs left by stopped processes or given to another replica
RETRY_SECONDS = 5.0  # the wait after a job's first failure, doubled after each next one in a row
MAX_ATTEMPTS = 8  # failures in a row (~10 minutes of waits) before the job ends `failed`


class JobKey(NamedTuple):
    """A job as its table is keyed: by agent first (migration 0016)."""

    agent_id: uuid.UUID
    job_id: uuid.UUID


async def create_job(session: AsyncSession, agent_id: uuid.UUID, items: Sequence[PassageWrite]) -> ImportJob:
    """The job and its items, stored in the caller's transaction: the worker sees it once that commits."""
    job = ImportJob(agent_id=agent_id, total=len(items))
    session.add(job)
    await session.flush()
    for start in range(0, len(items), INSERT_CHUNK):
        rows = [
            {
                "agent_id": agent_id,
                "job_id": job.id,
                "position": start + i,
                "passage": item.model_dump(mode="json"),
            }
            for i, item in enumerate(items[start : start + INSERT_CHUNK])
        ]
        await session.execute(insert(ImportItem), rows)
    return job


async def get_job(session: AsyncSession, agent_id: uuid.UUID, job_id: uuid.UUID, *, for_update: bool = False) -> ImportJob:
    job = await _job(session, JobKey(agent_id, job_id), for_update=for_update)
    if job is None:
        raise NotFound(f"import job {job_id} not found")
    return job


async def _job(session: AsyncSession, key: JobKey, *, for_update: bool = True) -> ImportJob | None:
    query = select(ImportJob).where(col(ImportJob.agent_id) == key.agent_id, col(ImportJob.id) == key.job_id)
    return (await session.exec(query.with_for_update() if for_update else query)).first()


def _items(key: JobKey) -> list[ColumnElement[bool]]:
    return [col(ImportItem.agent_id) == key.agent_id, col(ImportItem.job_id) == key.job_id]


async def cancel_job(session: AsyncSession, agent_id: uuid.UUID, job_id: uuid.UUID) -> ImportJob:
    """Stop the job: the passages stored so far stay, the rest of its items are dropped. A finished job is returned
    as it is."""
    job = await get_job(session, agent_id, job_id, for_update=True)
    if job.status in PENDING:
        job.status, job.finished_at = "cancelled", utcnow()
        job.updated_at = job.finished_at
        await session.execute(delete(ImportItem).where(*_items(JobKey(agent_id, job_id))))
    return job


def describe(job: ImportJob, now: datetime | None = None) -> ImportJobRead:
    """The job with its rate (items per second of the current run) and the time left at that rate."""
    rate = eta = None
    stored = job.done - job.run_started_done
    if job.run_started_at is not None and stored > 0:
        until = (now or utcnow()) if job.status in PENDING else (job.finished_at or job.updated_at)
        elapsed = (until - job.run_started_at).total_seconds()
        rate = stored / elapsed if elapsed > 0 else None
    if rate and job.status in PENDING:
        eta = (job.total - job.done) / rate
    return ImportJobRead.of(job, rate_per_second=rate, eta_seconds=eta)


def job_lock_key(job_id: uuid.UUID) -> int:
    """The advisory lock a process holds while it runs the job (the middle of the id: not any agent's turn key)."""
    return int.from_bytes(job_id.bytes[4:12], "big", signed=True)


@dataclass(frozen=True)
class _Item:
    position: int
    passage: NewPassage


async def _still_sourced(
    archival: ArchivalMemory, agent_id: uuid.UUID, passages: list[NewPassage], vectors: list[list[float]]
) -> tuple[list[NewPassage], list[list[float]]]:
    """The passages as they can be stored now, with their vectors: a source erased since the job was submitted (its
    sources were checked then) is dropped, and a passage drawn only from erased sources is not stored, as erasing
    them would have erased it."""
    gone = set(await archival.passages.unknown_sources(agent_id, [s for p in passages for s in p.sources]))
    if not gone:
        return passages, vectors
    kept = [
        (replace(p, sources=[s for s in p.sources if s not in gone]), vector)
        for p, vector in zip(passages, vectors, strict=True)
        if not p.sources or not gone.issuperset(p.sources)
    ]
    log.info("import: %d passages skipped, their sources erased since the job was submitted", len(passages) - len(kept))
    return [p for p, _ in kept], [vector for _, vector in kept]


class ImportWorker:
    """Runs pending import jobs, one at a time, for the life of the process."""

    def __init__(self, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], embedder: Embedder):
        self.engine, self.sessions, self.embedder = engine, sessions, embedder
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self, poll_seconds: float = POLL_SECONDS) -> None:
        self._task = asyncio.create_task(self._run(poll_seconds), name="engram-imports")

    def wake(self) -> None:
        """A job was created: look now rather than at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        """At shut-down: the slice in flight is rolled back and stored again when the job resumes."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _run(self, poll_seconds: float) -> None:
        while True:
            try:
                while await self.run_next():
                    pass
            except Exception:  # the database failed: jobs stay pending and are looked for again
                log.warning("import jobs: database error; looking again in %.0f s", poll_seconds, exc_info=True)
            with suppress(TimeoutError):
                async with asyncio.timeout(poll_seconds):
                    await self._wake.wait()
            self._wake.clear()

    async def run_next(self) -> bool:
        """Run one pending job that no process is running and that is not waiting to retry; False when there is
        none. A failure is recorded on the job (which then waits), not raised, unless it cannot be recorded."""
        async with self.sessions() as session:
            pending = await session.exec(
                select(ImportJob.agent_id, ImportJob.id)
                .where(
                    col(ImportJob.status).in_(PENDING),
                    or_(col(ImportJob.retry_at).is_(None), col(ImportJob.retry_at) <= func.now()),
                )
                .order_by(col(ImportJob.created_at))
            )
            jobs = [JobKey(*row) for row in pending.all()]
        for job in jobs:
            async with self.engine.connect() as conn:
                lock = {"k": job_lock_key(job.job_id)}
                taken = (await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), lock)).scalar()
                await conn.commit()
                if not taken:
                    continue  # another process runs it
                try:
                    await self._work(job)
                except Exception as exc:
                    if not await self._record_failure(job, exc):
                        raise  # the database itself: the worker waits a poll, then looks again
                finally:
                    try:
                        await conn.execute(text("SELECT pg_advisory_unlock(:k)"), lock)
                        await conn.commit()
                    except BaseException:
                        await conn.invalidate()  # closing the connection releases the lock
                        raise
            return True
        return False

    async def _work(self, key: JobKey) -> None:
        async with transaction(self.sessions) as session:
            job = await _job(session, key)
            if job is None or job.status not in PENDING or (job.retry_at is not None and job.retry_at > utcnow()):
                return  # ended, or its failure was recorded (by another process) since the worker listed it
            job.status, job.run_started_at, job.run_started_done = "running", utcnow(), job.done
        stored_through = one_by_one_through = -1  # positions
        while items := await self._next_slice(key, 1 if stored_through < one_by_one_through else SLICE):
            try:
                vectors = await self.embedder.embed_passages([item.passage.content for item in items])
            except EmbeddingRefused:
                if len(items) == 1:
                    raise  # this item: the job fails here, the items before it stored
                # Which item? The refused slice again, one item at a time (an endpoint may refuse the request's size).
                one_by_one_through = items[-1].position
                continue
            if not await self._store(key, items, vectors):
                return  # cancelled, or its agent deleted
            stored_through = items[-1].position
        async with transaction(self.sessions) as session:
            job = await _job(session, key)
            if job is not None and job.status == "running":
                job.status, job.finished_at = "done", utcnow()
                job.updated_at = job.finished_at
                log.info("import job %s done: %d items, %d near-duplicates", key.job_id, job.total, job.duplicates)

    async def _next_slice(self, key: JobKey, size: int) -> list[_Item]:
        async with self.sessions() as session:
            rows = await session.exec(select(ImportItem).where(*_items(key)).order_by(col(ImportItem.position)).limit(size))
            return [_Item(r.position, NewPassage.of(PassageWrite.model_validate(r.passage))) for r in rows.all()]

    async def _store(self, key: JobKey, items: list[_Item], vectors: list[list[float]]) -> bool:
        """Store the slice, delete its items and count them, in one transaction; False if the job is no longer
        running."""
        async with transaction(self.sessions) as session:
            job = await _job(session, key)
            if job is None or job.status != "running":
                return False
            archival = ArchivalMemory(session, self.embedder)
            passages, vectors = await _still_sourced(archival, job.agent_id, [item.passage for item in items], vectors)
            stored = await archival.add(job.agent_id, passages, vectors=vectors, own_source="drop")
            positions = [item.position for item in items]
            await session.execute(delete(ImportItem).where(*_items(key), col(ImportItem.position).in_(positions)))
            job.done += len(items)
            job.duplicates += sum(s.duplicate for s in stored)
            job.skipped += len(items) - len(passages)
            job.updated_at, job.error, job.attempts, job.retry_at = utcnow(), None, 0, None
        return True

    async def _record_failure(self, key: JobKey, exc: Exception) -> bool:
        """The job waits before its next attempt, or fails; False if that could not be stored."""
        error = f"{type(exc).__name__}: {exc}"
        try:
            async with transaction(self.sessions) as session:
                job = await _job(session, key)
                if job is None or job.status not in PENDING:
                    return True
                job.attempts += 1
                job.updated_at = utcnow()
                if isinstance(exc, EmbeddingRefused) or job.attempts >= MAX_ATTEMPTS:
                    job.status, job.finished_at, job.retry_at = "failed", job.updated_at, None
                    job.error = (
                        f"stopped at item {job.done} (attempt {job.attempts}); items from there on were not stored: {error}"
                    )
                    await session.execute(delete(ImportItem).where(*_items(key)))
                    log.warning("import job %s failed: %s", key.job_id, job.error)
                else:
                    wait = RETRY_SECONDS * 2 ** (job.attempts - 1)
                    job.error, job.retry_at = error, job.updated_at + timedelta(seconds=wait)
                    log.warning("import job %s: attempt %d failed, next in %.0f s: %s", key.job_id, job.attempts, wait, error)
        except Exception:
            log.warning("import job %s: could not record its failure", key.job_id, exc_info=True)
            return False
        return True
