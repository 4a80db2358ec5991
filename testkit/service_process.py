"""`engram serve` as a real process, for tests where processes are the point."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from testkit.scripted_llm import free_port


def scripted_env(data_dir: str, llm_url: str, **settings: str) -> dict[str, str]:
    """The environment of an `engram serve` on its own embedded data in `data_dir`, its LLM the scripted one at
    `llm_url` (a failed call not retried), and `settings` (ENGRAM_… variables) besides."""
    return {
        "ENGRAM_DATA_DIR": data_dir,
        "OPENAI_BASE_URL": llm_url,
        "OPENAI_API_KEY": "bench",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_LLM_MAX_RETRIES": "0",
        **settings,
    }


def start_service(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, process.stdout.read() if process.stdout else "service exited"
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "service did not become ready"
        time.sleep(0.25)


def stop_service(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_service(env: dict[str, str]) -> Iterator[str]:
    process, base = start_service(env)
    try:
        yield base
    finally:
        stop_service(process)
