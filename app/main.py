"""The FastAPI application: create_app() and its lifespan (database, migrations, embedder, LLM client, the warm-up
that readiness waits for)."""

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from sqlalchemy import QueuePool, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import __version__, db, letta_api
from app.api import (
    agents,
    archival_import,
    chat,
    console,
    memory,
    memory_passes,
    openai_compat,
    operations,
    passage_keys,
    portability,
    recollection,
    tenants,
)
from app.api.draining import LIFESPAN_RESERVE_SECONDS, RETRY_AFTER_SECONDS, Drain, DrainGate
from app.api.errors import install_error_handlers
from app.api.replica_reads import ReplicaReads
from app.auth.principal import Authenticator
from app.chat.memory_pass import MemoryPasses
from app.chat.runner import TurnRunner
from app.chat.turn_state import TurnResult, TurnServices
from app.chat.turns import ChatTurns
from app.delivery.hub import EventHub
from app.delivery.recovery import interrupt_orphaned_turns, sweep
from app.delivery.relay import Broadcast, EventRelay
from app.delivery.stream import TurnStreams
from app.detached import DetachedTasks
from app.errors import DATABASE_RETRY_AFTER_SECONDS
from app.llm.choice import choose_chat_model
from app.llm.embeddings import Embedder, build_embedder
from app.llm.embeddings.space import check_embedding_space
from app.mcp_server.http import McpEndpoint
from app.memory.archival.imports import ImportWorker
from app.memory.kinds import TABLES
from app.memory.search import agent_indexes
from app.metrics import ASYNCIO_TASKS, DB_CONNECTIONS_IN_USE
from app.observability import RequestContextMiddleware
from app.quotas.headers import QuotaHeadersMiddleware
from app.readiness import WARM_CONNECTIONS, Warmup, warm_database
from app.replicas import ReadReplicas
from app.runtime import Runtime, runtime
from app.settings import Settings, get_settings

log = logging.getLogger("engram")
WARMUP_RETRY_AFTER_SECONDS = 1  # the warm-up takes seconds, and is tried again within seconds when it fails


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings  # create_app's inputs; what the lifespan builds is app.state.runtime
    async with AsyncExitStack() as cleanup:  # undone in reverse order, on any exit
        embedder: Embedder = app.state.embedder or await asyncio.to_thread(build_embedder, settings)
        # What the first requests would compute, computed while the rest starts; /readyz says ready once it is
        # (app/readiness.py).
        warmup = app.state.warmup = Warmup(embedder)
        warmup.start()
        cleanup.push_async_callback(warmup.stop)
        url = settings.database_url
        if url is None:
            embedded = await asyncio.to_thread(db.start_embedded_postgres, settings.data_dir)
            cleanup.push_async_callback(asyncio.to_thread, embedded.stop)
            url = embedded.url
        if settings.migrate_on_start:
            await db.migrate(url, embedder.dim, settings.partitions)
        engine = db.create_engine(url, settings.db_pool_size)
        cleanup.push_async_callback(engine.dispose)
        replicas = None
        if settings.database_replica_urls:
            replicas = ReadReplicas(
                settings.database_replica_urls,
                engine,
                max_lag_seconds=settings.replica_max_lag_seconds,
                pool_size=settings.db_pool_size,
            )
            cleanup.push_async_callback(replicas.stop)
            await replicas.check()  # the first reads know which replicas they may use
            replicas.start()
        async with _serving(app, settings, engine, embedder, replicas, warmup):
            yield


@asynccontextmanager
async def _serving(
    app: FastAPI,
    settings: Settings,
    engine: AsyncEngine,
    embedder: Embedder,
    replicas: ReadReplicas | None,
    warmup: Warmup,
) -> AsyncIterator[None]:
    await check_embedding_space(engine, embedder)
    sessions = db.session_factory(engine)
    await interrupt_orphaned_turns(engine, sessions)
    llm, settings = await asyncio.to_thread(choose_chat_model, settings)  # loading an offline model takes a moment
    authenticator = Authenticator(sessions, settings.admin_key)
    if not await authenticator.keys_configured():
        log.warning("no API keys configured: serving loopback clients only (set ENGRAM_ADMIN_KEY to issue keys)")
    hub = EventHub()
    origin = uuid.uuid4()
    relay = EventRelay(engine, sessions, hub, origin)
    relay.start()
    await db.open_pool(engine, settings.db_pool_size)
    turn_tasks: DetachedTasks[TurnResult] = DetachedTasks()
    services = TurnServices(engine, sessions, embedder, llm, Broadcast(hub, origin), settings)
    runner, passes = TurnRunner(services), MemoryPasses(services)
    sweeper = asyncio.create_task(sweep(engine, sessions, runner.vectors), name="engram-sweep")
    indexer = asyncio.create_task(agent_indexes.maintain(engine, TABLES), name="engram-agent-indexes")
    streams = TurnStreams(ChatTurns(runner, passes), turn_tasks, hub, stopping=lambda: app.state.drain.active)
    imports = ImportWorker(engine, sessions, embedder)
    imports.start()
    app.state.runtime = Runtime(settings, engine, sessions, embedder, authenticator, streams, imports, replicas)
    loop = asyncio.get_running_loop()  # /metrics may be read from another thread (a sync route, a test)
    ASYNCIO_TASKS.set_function(lambda: len(asyncio.all_tasks(loop)))
    if isinstance(engine.pool, QueuePool):  # db.create_engine's: the gauge counts its checked-out connections
        DB_CONNECTIONS_IN_USE.set_function(engine.pool.checkedout)
    # the pooled connections the first requests will take (the most recently used first)
    await warm_database(sessions, embedder, min(WARM_CONNECTIONS, settings.db_pool_size))
    await warmup.first_attempt()  # not listening yet: the first request finds it done, unless it failed or took long
    try:
        async with app.state.mcp.running():  # the MCP session manager: a mounted app's own lifespan never runs
            yield
    finally:
        drain: Drain = app.state.drain
        runner.abandon_background_work()  # message vectors: the sweep (here or on another replica) computes them
        await imports.stop()  # the slice in flight is stored again when the job resumes (here or on another replica)
        await turn_tasks.shutdown(max(drain.remaining() - LIFESPAN_RESERVE_SECONDS, 0.0))
        await passes.shutdown()
        await app.state.runtime.quotas.tally.flush_at_exit()
        sweeper.cancel()
        indexer.cancel()  # a build cut short leaves an invalid index, built again by the next round
        await asyncio.wait({sweeper, indexer}, timeout=LIFESPAN_RESERVE_SECONDS)
        await relay.stop()


def create_app(settings: Settings | None = None, *, embedder: Embedder | None = None) -> FastAPI:
    """embedder: an already loaded embedder to share (tests); otherwise one is built at start-up."""
    # FastAPIOffline: /docs and /redoc with their assets served from the fastapi-offline package, not a CDN.
    app = FastAPIOffline(
        title="Engram",
        version=__version__,
        summary="Long-term memory for AI agents: core, archival and recall memory behind one API.",
        lifespan=lifespan,
    )
    app.state.settings = settings or get_settings()
    app.state.embedder = embedder
    app.state.drain = Drain(app.state.settings.shutdown_grace_seconds, app.state.settings.shutdown_notice_seconds)
    install_error_handlers(app)
    app.add_middleware(ReplicaReads)  # the innermost: it sees the error handlers' answers
    app.add_middleware(DrainGate, drain=app.state.drain)
    app.add_middleware(
        RequestContextMiddleware,
        max_body_bytes=app.state.settings.max_request_bytes,
        bulk=(archival_import.PATH, app.state.settings.max_import_bytes),
    )
    app.add_middleware(QuotaHeadersMiddleware)
    app.state.mcp = McpEndpoint()  # MCP over streamable HTTP, behind the same keys (app/mcp_server/)
    app.add_route("/mcp", app.state.mcp, include_in_schema=False)
    # archival_import before memory: `…/archival/import` is not a passage id
    routers = (
        agents,
        archival_import,
        memory,
        passage_keys,
        recollection,
        memory_passes,
        chat,
        openai_compat,
        tenants,
        portability,
        console,
    )
    for api in (*routers, operations):
        app.include_router(api.router)
    app.include_router(letta_api.router)  # Letta's API under /letta, for the official letta-client SDKs

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process is up."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["ops"],
        responses={503: {"description": "Not ready: shutting down, the database unreachable, or still warming up"}},
    )
    async def readyz(request: Request) -> JSONResponse:
        """Readiness: the service is not shutting down, the database answers, and the start-up's warm-up is done
        (the recollection gate's cohorts embedded): the first requests are as fast as the next (docs/operations.md)."""
        # Read replicas are listed with their state: one that is down or lags leaves the service ready (the
        # primary serves its reads).
        if request.app.state.drain.active:
            return JSONResponse(
                {"error": "not_ready", "detail": "shutting down"},
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        try:
            async with asyncio.timeout(3):
                async with runtime(request.app).engine.connect() as conn:
                    await conn.execute(text("SELECT 1"))
        except Exception as exc:  # any failure to reach the database means not ready
            return JSONResponse(
                {"error": "not_ready", "detail": f"database unreachable: {type(exc).__name__}"},
                status_code=503,
                headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
            )
        warmup: Warmup = request.app.state.warmup
        if not warmup.done:  # still warming up, or its embedder failing: tried again in the background
            return JSONResponse(
                {"error": "not_ready", "detail": warmup.problem},
                status_code=503,
                headers={"Retry-After": str(WARMUP_RETRY_AFTER_SECONDS)},
            )
        replicas = runtime(request.app).replicas
        return JSONResponse({"status": "ready"} | ({"replicas": replicas.status()} if replicas else {}))

    return app


app = create_app()
