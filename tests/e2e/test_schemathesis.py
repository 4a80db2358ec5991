"""Schemathesis against the committed openapi.json, on a running `engram serve` with API keys: every operation,
no 5xx, every status documented, every response matching its schema."""

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from pgserver.postgres_server import PostgresServer

from testkit.scripted_llm import ScriptedLLM, call, tools
from testkit.service_process import running_service
from tests.support import ROOT
from tests.support.database import create_database

SPEC = ROOT / "openapi.json"
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
ADMIN_KEY = "schemathesis-admin-" + "x" * 24
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def schemathesis(tmp_path: Path, base: str, key: str, extra_config: str, *selection: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / f"schemathesis-{uuid.uuid4().hex[:6]}.toml"
    config.write_text(f'headers = {{ Authorization = "Bearer {key}" }}\n{extra_config}')
    command = [
        shutil.which("schemathesis") or "schemathesis",
        "--config-file",
        str(config),
        "run",
        str(SPEC),
        "--url",
        base,
        "--checks",
        CHECKS,
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "15",
        "--max-time",
        "30",
        "--seed",
        "1",
        "--no-shrink",
        "--generation-database",
        "none",
        *selection,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def operation_counts() -> tuple[int, int, int]:
    """(operations outside /v1/admin and /letta, those under /v1/admin, those under /letta) in the committed
    document: every one must be tested."""
    paths = json.loads(SPEC.read_text())["paths"]
    operations = [path for path, item in paths.items() for method in item if method in HTTP_METHODS]
    admin = sum(path.startswith("/v1/admin") for path in operations)
    letta = sum(path.startswith("/letta/") for path in operations)
    return len(operations) - admin - letta, admin, letta


@pytest.mark.skipif(shutil.which("schemathesis") is None, reason="schemathesis is not installed (pip install -e '.[dev]')")
def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    postgres_server: PostgresServer, llm: ScriptedLLM, tmp_path: Path
) -> None:
    url = create_database(postgres_server, f"engram_fuzz_{uuid.uuid4().hex[:8]}")
    llm.reset(
        fallback=lambda request: (
            tools(call("send_message", text="ok")) if request.get("tools") else {"role": "assistant", "content": "summary"}
        )
    )
    env = {
        "DATABASE_URL": url,
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "t",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_ADMIN_KEY": ADMIN_KEY,
    }
    with running_service(env) as base:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        tenant = httpx.post(f"{base}/v1/admin/tenants", json={"name": "fuzz"}, headers=admin).json()
        key = httpx.post(f"{base}/v1/admin/tenants/{tenant['id']}/keys", json={}, headers=admin).json()["key"]
        agent = httpx.post(f"{base}/v1/agents", json={"name": "fuzzed"}, headers={"X-API-Key": key}).json()
        pinned = f'[parameters]\n"path.agent_id" = "{agent["id"]}"\n'
        # Letta's API (app/letta_api) runs on its own: each run has its own time budget.
        runs = [
            schemathesis(tmp_path, base, key, pinned, "--exclude-path-regex", "^/(v1/admin|letta/)"),
            schemathesis(tmp_path, base, ADMIN_KEY, "", "--include-path-regex", "^/v1/admin"),
            schemathesis(tmp_path, base, key, pinned, "--include-path-regex", "^/letta/"),
        ]
    for run, operations in zip(runs, operation_counts(), strict=True):
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        assert f"Tested: {operations}" in run.stdout, run.stdout[-3000:]
        print(run.stdout[-1500:])
