"""Every failure a user can cause ends an `engram` command with one line on stderr and exit status 1, never a
traceback: run as real processes, since what reaches the terminal (logs, warnings) is the point."""

import threading
import uuid
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pgserver.postgres_server import PostgresServer

from testkit.scripted_llm import free_port
from tests.support.cli import engram, refused


def test_keys_on_a_fresh_data_directory(tmp_path: Path) -> None:
    """`keys create` migrates an empty database first; bad ids and unknown ones are one line each."""
    data = {"ENGRAM_DATA_DIR": str(tmp_path / "data")}
    created = engram("keys", "create", "--tenant", "acme", **data)
    assert created.returncode == 0 and created.stderr == "", created.stderr
    key_id = created.stdout.split("key id ")[1].split()[0]
    assert created.stdout.rsplit(": ", 1)[1].strip().startswith("engk_")

    refused(engram("keys", "revoke", "not-a-key", **data), "'not-a-key' is not a key id")
    unknown = str(uuid.uuid4())
    refused(engram("keys", "revoke", unknown, **data), f"no API key {unknown}")
    refused(engram("keys", "create", "--tenant", unknown, **data), f"no tenant {unknown}", "--tenant acme")
    revoked = engram("keys", "revoke", key_id, **data)
    assert (revoked.returncode, revoked.stdout) == (0, "revoked\n"), revoked.stderr
    listed = engram("keys", "list", **data)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    key = created.stdout.rsplit(": ", 1)[1].strip()
    assert key_id in listed.stdout and "acme" in listed.stdout and key[:11] in listed.stdout and key not in listed.stdout
    version = engram("--version")
    assert version.returncode == 0 and version.stdout.startswith("engram "), version.stderr


def test_files_that_cannot_be_read_or_written(tmp_path: Path) -> None:
    nowhere = {"ENGRAM_URL": f"http://127.0.0.1:{free_port()}"}
    refused(engram("import", str(tmp_path / "missing.json"), **nowhere), "No such file or directory", "missing.json")
    refused(engram("import", str(tmp_path), **nowhere), "Is a directory")
    refused(engram("export", "Hana", "-o", str(tmp_path / "no" / "such" / "x.json"), **nowhere), "No such file or directory")


def test_settings_and_databases_that_do_not_work(postgres_server: PostgresServer) -> None:
    refused(engram("migrate", ENGRAM_ADMIN_KEY="short"), "invalid settings: ENGRAM_ADMIN_KEY: String should have at least 24")
    refused(engram("migrate", DATABASE_URL="mysql://db/engram"), "DATABASE_URL must be a PostgreSQL URL")
    closed = f"postgresql://engram:pw@127.0.0.1:{free_port()}/engram"
    refused(engram("keys", "create", "--tenant", "acme", DATABASE_URL=closed), "cannot reach the database", "DATABASE_URL")
    missing = postgres_server.get_uri("no_such_database")
    refused(engram("migrate", DATABASE_URL=missing), "the database refused", "no_such_database")


@pytest.fixture
def not_engram(tmp_path: Path) -> Iterator[str]:
    """An HTTP server that is not Engram: /v1/agents is a text file; other paths answer HTML error pages."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "agents").write_text("hello, I am a static file server\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_client_commands_against_a_server_that_is_gone_or_not_engram(not_engram: str) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    refused(engram("agents", "ls", "--url", gone), f"cannot reach the server at {gone}", "ENGRAM_URL")
    refused(engram("chat", "Hana", "-m", "hi", "--url", gone), "cannot reach the server")
    refused(engram("agents", "ls", "--url", not_engram), "something other than JSON", "ENGRAM_URL")
    refused(engram("memory", "show", "Hana", "--url", not_engram), "something other than JSON")
    refused(engram("agents", "create", "Hana", "--url", not_engram), "the server answered 501", "Unsupported method")
