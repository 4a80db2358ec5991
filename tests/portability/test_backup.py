"""`engram backup` and `engram restore`: a backup taken while the service serves restores, into a fresh data
directory or over a changed database, to the same memory — blocks with their history, passages with their vectors,
messages, turns — and a database the service starts on."""

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from pgserver.postgres_server import PostgresServer

from app.llm.embeddings import Embedder
from app.main import create_app
from testkit.scripted_llm import ScriptedLLM
from testkit.service_process import running_service
from tests.support.cli import engram, refused
from tests.support.database import create_database, run_sql
from tests.support.portability import populate, settled_export
from tests.support.service import checked_client, scripted_settings


def same_memory(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != "exported_at"}


def test_backup_while_serving_restores_into_a_fresh_data_directory(tmp_path: Path, llm: ScriptedLLM) -> None:
    llm_env = {
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "test",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_LLM_MAX_RETRIES": "0",
    }
    serving, fresh = {"ENGRAM_DATA_DIR": str(tmp_path / "serving")}, {"ENGRAM_DATA_DIR": str(tmp_path / "fresh")}
    backup = tmp_path / "engram.dump"
    with running_service({**serving, **llm_env}) as base, httpx.Client(base_url=base, timeout=60) as service:
        agent = service.post("/v1/agents", json={"name": "Hana"}).json()
        populate(service, agent, llm)
        before = settled_export(service, agent["id"])

        busy = service.post("/v1/agents", json={"name": "Busy"}).json()
        written: list[str] = []
        stop = threading.Event()

        def keep_writing() -> None:  # another client writing all through the backup
            with httpx.Client(base_url=base, timeout=60) as writer:
                while not stop.is_set():
                    note = f"note {len(written)}"
                    assert writer.post(f"/v1/agents/{busy['id']}/archival", json={"content": note}).status_code == 201
                    written.append(note)

        with ThreadPoolExecutor(1) as pool:
            writing = pool.submit(keep_writing)
            while len(written) < 3:
                time.sleep(0.05)
            written_before = len(written)
            made = engram("backup", str(backup), **serving)
            stop.set()
            writing.result()
        assert made.returncode == 0, made.stderr
        assert f"backed up the database to {backup}" in made.stdout and backup.read_bytes().startswith(b"PGDMP")
        assert not backup.with_name("engram.dump.part").exists()
        refused(engram("restore", str(backup), **serving), "other connection(s) to the database", "stop `engram serve`")
        later = service.post(f"/v1/agents/{agent['id']}/archival", json={"content": "written after the backup"})
        assert later.status_code == 201  # the service went on serving, and this is not in the backup

    restored = engram("restore", str(backup), **fresh)
    assert (restored.returncode, restored.stderr) == (0, ""), restored.stderr
    with running_service({**fresh, **llm_env}) as base, httpx.Client(base_url=base, timeout=60) as service:
        after = settled_export(service, agent["id"])
        assert same_memory(after) == same_memory(before)  # ids, revisions, vectors, messages, turns and events
        notes = [p["content"] for p in settled_export(service, busy["id"])["passages"]]
        # The database as of one instant during the backup: every note written before it, none missing in between.
        assert written_before <= len(notes) <= len(written) and sorted(notes) == sorted(written[: len(notes)])
        found = service.get(f"/v1/agents/{agent['id']}/archival", params={"query": "好きな食べ物"}).json()["items"]
        assert found[0]["content"] == "太郎の好きな食べ物はラーメン"  # the vectors and their index work


def test_restore_over_a_changed_database(
    postgres_server: PostgresServer, embedder: Embedder, llm: ScriptedLLM, tmp_path: Path
) -> None:
    """DATABASE_URL: what changed after the backup (an agent deleted, another created) is undone by the restore."""
    url = create_database(postgres_server, f"engram_backup_{uuid.uuid4().hex[:8]}")
    settings = scripted_settings(url, llm)
    with checked_client(create_app(settings, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "Hana"}).json()
        populate(client, agent, llm)
        before = settled_export(client, agent["id"])
    revision = run_sql(url, "SELECT version_num FROM alembic_version")
    backup = tmp_path / "engram.dump"
    assert engram("backup", str(backup), DATABASE_URL=url).returncode == 0

    with checked_client(create_app(settings, embedder=embedder)) as client:
        assert client.delete(f"/v1/agents/{agent['id']}").status_code == 204
        client.post("/v1/agents", json={"name": "created after the backup"})

    restored = engram("restore", str(backup), DATABASE_URL=url)
    assert (restored.returncode, restored.stderr) == (0, ""), restored.stderr
    assert run_sql(url, "SELECT version_num FROM alembic_version") == revision
    with checked_client(create_app(settings, embedder=embedder)) as client:
        assert [a["name"] for a in client.get("/v1/agents").json()["items"]] == ["Hana"]
        assert same_memory(settled_export(client, agent["id"])) == same_memory(before)


def test_restore_refuses_what_is_not_a_backup(tmp_path: Path) -> None:
    data = {"ENGRAM_DATA_DIR": str(tmp_path / "data")}
    refused(engram("restore", str(tmp_path / "missing.dump"), **data), "No such file or directory", "missing.dump")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a dump")
    refused(engram("restore", str(notes), **data), f"{notes} is not a backup")
    assert not (tmp_path / "data").exists()  # refused before the database was started
    refused(engram("backup", str(tmp_path / "no" / "dir" / "x.dump"), **data), "pg_dump failed", "could not open output file")
