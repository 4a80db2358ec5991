"""Commands that run on the server's machine, against its database: `serve`, `migrate`, `keys`, `reembed`, `mcp`,
`openapi`."""

import argparse
import asyncio
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    from app.api.draining import Drain
    from app.observability import configure_logging

    configure_logging(args.log_level, args.log_format)
    from app.main import app  # after logging is configured: importing it builds the app

    class DrainingServer(uvicorn.Server):
        """uvicorn, with a notice period between the first signal and its own shut-down (app/api/draining.py)."""

        def __init__(self, config: uvicorn.Config, drain: Drain):
            super().__init__(config)
            self.drain = drain
            self.signal: int | None = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.signal is None:
                self.signal = sig
                self.drain.begin()
            else:  # a second signal: stop now (a second Ctrl-C forces)
                super().handle_exit(sig, frame)

        async def on_tick(self, counter: int) -> bool:
            if self.signal is not None and not self.should_exit and self.drain.notice_over():
                super().handle_exit(self.signal, None)
            return await super().on_tick(counter)

    drain: Drain = app.state.drain
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        ws="websockets-sansio",
        ws_max_size=app.state.settings.max_request_bytes,  # a bigger frame is closed with 1009 before it is read
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=drain.requests_timeout,  # type: ignore[arg-type]  # uvicorn says int; asyncio.timeout() takes our float
    )
    DrainingServer(config, drain).run()


def _migrate(args: argparse.Namespace) -> None:
    if args.down_to is None:
        migrated_database_url()
        print("database schema is up to date")
        return
    from app import db
    from app.llm.embeddings import build_embedder
    from app.settings import get_settings

    db.run_migrations(database_url(), build_embedder(get_settings()).dim, args.down_to, downgrade=True)
    print(f"database schema is at {args.down_to}")


def database_url() -> str:
    """DATABASE_URL, or the embedded PostgreSQL under ENGRAM_DATA_DIR (started if it is not running)."""
    from app import db
    from app.settings import get_settings

    settings = get_settings()
    if settings.database_url is None:
        return db.start_embedded_postgres(settings.data_dir).url
    try:
        return db.asyncpg_url(settings.database_url)
    except ValueError as exc:
        raise SystemExit(f"engram: {exc}") from None


def migrated_database_url() -> str:
    """database_url() with the schema brought up to date (a fresh data directory has no tables yet)."""
    from app import db
    from app.llm.embeddings import build_embedder
    from app.settings import get_settings

    url = database_url()
    db.run_migrations(url, build_embedder(get_settings()).dim)
    return url


def _keys_create(args: argparse.Namespace) -> None:
    """Issue a key for a tenant (by id or name; a new name creates the tenant). Prints the key once."""
    from app import db
    from app.auth.keys import IssuedKey
    from app.auth.service import KeyService
    from app.errors import NotFound

    tenant_id = _uuid_or_none(args.tenant)
    url = migrated_database_url()

    async def issue() -> IssuedKey:
        engine = db.create_engine(url)
        try:
            async with db.transaction(db.session_factory(engine)) as session:
                keys = KeyService(session)
                tenant = next((t for t in await keys.tenants() if t.id == tenant_id or t.name == args.tenant), None)
                if tenant is None and tenant_id is not None:
                    raise NotFound(f"no tenant {tenant_id} (a new tenant is created by name: --tenant acme)")
                tenant = tenant or await keys.create_tenant(args.tenant)
                return await keys.issue(tenant.id, args.name)
        finally:
            await engine.dispose()

    issued = asyncio.run(issue())
    print(f"tenant {issued.record.tenant_id}")
    print(f"key id {issued.record.id} (to revoke it: engram keys revoke {issued.record.id})")
    print(f"API key (shown once, store it now): {issued.key}")


def _keys_revoke(args: argparse.Namespace) -> None:
    from app import db
    from app.auth.service import KeyService

    key_id = _uuid_or_none(args.key_id)
    if key_id is None:
        raise SystemExit(f"engram: {args.key_id!r} is not a key id (the UUID that `engram keys create` prints)")
    url = migrated_database_url()

    async def revoke() -> None:
        engine = db.create_engine(url)
        try:
            async with db.transaction(db.session_factory(engine)) as session:
                await KeyService(session).revoke(key_id)
        finally:
            await engine.dispose()

    asyncio.run(revoke())
    print("revoked")


def _keys_list(args: argparse.Namespace) -> None:
    """Every tenant's keys: id, name, prefix, when issued and revoked (the keys themselves are never stored)."""
    from rich.console import Console
    from rich.table import Table

    from app import db
    from app.auth.models import ApiKey
    from app.auth.service import KeyService

    url = migrated_database_url()

    async def listing() -> list[tuple[str, list[ApiKey]]]:
        engine = db.create_engine(url)
        try:
            async with db.transaction(db.session_factory(engine)) as session:
                keys = KeyService(session)
                return [(f"{t.name} ({t.id})", list(await keys.keys(t.id))) for t in await keys.tenants()]
        finally:
            await engine.dispose()

    table = Table("tenant", "key id", "name", "prefix", "issued", "revoked")
    for tenant, records in asyncio.run(listing()):
        for record in records:
            revoked = f"{record.revoked_at:%Y-%m-%d %H:%M}" if record.revoked_at else ""
            table.add_row(tenant, str(record.id), record.name, record.prefix, f"{record.created_at:%Y-%m-%d %H:%M}", revoked)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)  # ids whole when piped
    console.print(table if table.row_count else "no API keys (issue one: engram keys create --tenant NAME)")


def _uuid_or_none(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _reembed(_: argparse.Namespace) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from app import db
    from app.llm.embeddings import build_embedder
    from app.memory.reembed import ReembedResult, reembed
    from app.settings import get_settings

    settings = get_settings()
    url = database_url()
    embedder = build_embedder(settings)
    db.run_migrations(url, embedder.dim)

    class Bar:
        def __init__(self, bar: Progress):
            self.bar, self.task = bar, bar.add_task(f"re-embedding with {embedder.model}", total=None)

        def total(self, rows: int) -> None:
            self.bar.update(self.task, total=rows)

        def advance(self, rows: int) -> None:
            self.bar.advance(self.task, rows)

    async def run() -> ReembedResult:
        engine = db.create_engine(url)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"), TimeRemainingColumn())
        try:
            with Progress(*columns) as bar:
                return await reembed(engine, embedder, progress=Bar(bar))
        finally:
            await engine.dispose()

    result = asyncio.run(run())
    print(f"re-embedded {result} with {embedder.model} ({embedder.dim} dims)")


def _mcp(args: argparse.Namespace) -> None:
    """Serve MCP over stdin/stdout, with the service's runtime (database, embedder, LLM) in this process. Only the
    protocol goes to stdout; logs go to stderr."""
    import signal
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    from app.errors import EngramError
    from app.main import create_app
    from app.mcp_server.stdio import stdio_mcp_server
    from app.runtime import Runtime, runtime

    app = create_app()

    @asynccontextmanager
    async def started() -> AsyncIterator[Runtime]:
        async with app.router.lifespan_context(app):
            yield runtime(app)

    async def serve() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)  # shut the runtime down cleanly
        await stdio_mcp_server(started, args.key).run_stdio_async()

    try:
        asyncio.run(serve())
    except* EngramError as refused:  # e.g. an invalid key: say why, on stderr
        reason: BaseException = refused
        while isinstance(reason, BaseExceptionGroup):  # the SDK's task groups nest it
            reason = reason.exceptions[0]
        raise SystemExit(f"engram mcp: {reason}") from None
    except* (asyncio.CancelledError, KeyboardInterrupt):
        pass


def _openapi(args: argparse.Namespace) -> None:
    from app.main import create_app

    spec = json.dumps(create_app().openapi(), indent=2, ensure_ascii=False) + "\n"
    if args.output == "-":
        sys.stdout.write(spec)
    else:
        Path(args.output).write_text(spec)


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    serve = sub.add_parser("serve", help="run the HTTP/WebSocket service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--log-format", choices=["json", "text"], default="json")
    serve.set_defaults(run=_serve)
    migrate = sub.add_parser("migrate", help="apply database migrations")
    migrate.add_argument(
        "--down-to",
        metavar="REVISION",
        help="undo the migrations after REVISION instead (e.g. 0014_unique_agent_names: one table each again)",
    )
    migrate.set_defaults(run=_migrate)
    keys = sub.add_parser("keys", help="manage API keys").add_subparsers(dest="keys_command", required=True)
    create = keys.add_parser("create", help="issue an API key for a tenant")
    create.add_argument("--tenant", required=True, help="tenant id or name (a new name creates the tenant)")
    create.add_argument("--name", default="cli", help="a label for the key")
    create.set_defaults(run=_keys_create)
    revoke = keys.add_parser("revoke", help="revoke an API key")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=_keys_revoke)
    keys.add_parser("list", help="list every tenant's keys (never the keys themselves)").set_defaults(run=_keys_list)
    sub.add_parser("reembed", help="embed all stored memory again with the configured embedder").set_defaults(run=_reembed)
    mcp = sub.add_parser("mcp", help="serve Engram's memory to an MCP client over stdio")
    mcp.add_argument(
        "--key",
        default=os.environ.get("ENGRAM_API_KEY") or None,
        help="act for this API key's tenant (default: $ENGRAM_API_KEY; without one: the default tenant)",
    )
    mcp.set_defaults(run=_mcp, logs=logging.INFO)  # a long-running server: its logs (on stderr) are wanted
    spec = sub.add_parser("openapi", help="write the OpenAPI document")
    spec.add_argument("--output", default="openapi.json")
    spec.set_defaults(run=_openapi)
