"""Engram served for the TypeScript client's tests: `engram serve` on the embedded defaults (its own data in a
temporary folder), its LLM the scripted one on loopback, API keys on; and beside it one with no LLM at all (chat
answers 503 there). Runs the command given with ENGRAM_URL, ENGRAM_API_KEY (a key of the tenant ENGRAM_TENANT_ID),
ENGRAM_ADMIN_KEY and ENGRAM_URL_WITHOUT_LLM set, and answers with its exit code; with no command, prints them and
serves until interrupted.

    python test/served.py npm test
"""

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # testkit/, as tests/ and bench/ import it

import httpx  # noqa: E402

from testkit.scripted_llm import ScriptedLLM, call, error, text, tools  # noqa: E402
from testkit.service_process import running_service, scripted_env  # noqa: E402

ADMIN_KEY = "typescript-client-tests-admin-key"
FAILS = "(the model fails)"  # in a user's message: the scripted model answers it with a 500
# No endpoint, and not the packaged demo model either (CI installs it): chat answers 503.
WITHOUT_LLM = {"ENGRAM_LOCAL_LLM": "false", "OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "ENGRAM_LLM_MODEL": ""}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted model: a chat turn answers `Noted: <the user's message>` with send_message (a 500 when the
    message asks for FAILS); a memory pass, which has no send_message, ends at once."""
    offered = {tool["function"]["name"] for tool in request.get("tools") or []}
    if "send_message" not in offered:
        return text("Nothing to keep.")
    said = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")
    return error(500) if FAILS in said else tools(call("send_message", text=f"Noted: {said}"))


def tenant_with_key(base: str) -> tuple[str, str]:
    """A new tenant's id, and an API key of it."""
    admin = httpx.Client(base_url=f"{base}/v1/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    tenant: str = admin.post("/tenants", json={"name": "typescript-client"}).raise_for_status().json()["id"]
    key: str = admin.post(f"/tenants/{tenant}/keys", json={}).raise_for_status().json()["key"]
    return tenant, key


def main(command: list[str]) -> int:
    llm = ScriptedLLM().start()
    llm.reset(fallback=answer)
    with ExitStack() as stack:
        stack.callback(llm.stop)
        data = [stack.enter_context(tempfile.TemporaryDirectory()) for _ in range(2)]
        envs = [scripted_env(data[0], llm.url, ENGRAM_ADMIN_KEY=ADMIN_KEY), {"ENGRAM_DATA_DIR": data[1], **WITHOUT_LLM}]
        # Both start at once (each takes seconds); each is stopped on the way out, even when the other failed.
        with ThreadPoolExecutor(2) as starting:
            base, without_llm = starting.map(lambda env: stack.enter_context(running_service(env)), envs)
        tenant, key = tenant_with_key(base)
        env = {
            "ENGRAM_URL": base,
            "ENGRAM_API_KEY": key,
            "ENGRAM_ADMIN_KEY": ADMIN_KEY,
            "ENGRAM_TENANT_ID": tenant,
            "ENGRAM_URL_WITHOUT_LLM": without_llm,
        }
        if command:
            return subprocess.run(command, env={**os.environ, **env}).returncode
        print("\n".join(f"export {name}={value}" for name, value in env.items()), flush=True)
        try:
            input("serving; Enter (or Ctrl-C) stops\n")
        except (KeyboardInterrupt, EOFError):
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
