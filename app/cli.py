"""`engram serve`, `engram migrate`, `engram openapi`."""

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level=args.log_level, ws="websockets-sansio")


def _migrate(_: argparse.Namespace) -> None:
    from app import db
    from app.settings import get_settings

    settings = get_settings()
    url = settings.database_url or db.start_embedded_postgres(settings.data_dir)
    db.run_migrations(url, settings.vector_dim)
    print("database schema is up to date")


def _openapi(args: argparse.Namespace) -> None:
    from app.main import create_app

    spec = json.dumps(create_app().openapi(), indent=2, ensure_ascii=False) + "\n"
    if args.output == "-":
        sys.stdout.write(spec)
    else:
        Path(args.output).write_text(spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for AI agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP/WebSocket service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(run=_serve)
    sub.add_parser("migrate", help="apply database migrations").set_defaults(run=_migrate)
    spec = sub.add_parser("openapi", help="write the OpenAPI document")
    spec.add_argument("--output", default="openapi.json")
    spec.set_defaults(run=_openapi)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.run(args)


if __name__ == "__main__":
    main()
