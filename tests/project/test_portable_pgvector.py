"""scripts/portable-pgvector.sh (the README's install step) leaves nothing in the temporary folder, whether it ends as
usual or is stopped. Where the embedded pgvector runs (most machines) the script only probes it; where it does not,
it rebuilds it and these runs check that path."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "portable-pgvector.sh"


@pytest.fixture
def tmpdir_of_the_run() -> Iterator[Path]:
    """A fresh TMPDIR, short (the probe's server puts its socket under it: a socket path has ~100 characters)."""
    folder = Path(tempfile.mkdtemp(prefix="pgv-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder)


def environment(tmpdir: Path) -> dict[str, str]:
    venv = str(Path(sys.executable).parent)  # the script runs `python`: this virtualenv's
    inherited = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}  # unset: pgserver falls back to TMPDIR
    return {**inherited, "TMPDIR": str(tmpdir), "PATH": f"{venv}:{os.environ['PATH']}"}


def test_the_script_leaves_no_temporary_folder(tmpdir_of_the_run: Path) -> None:
    done = subprocess.run(["bash", str(SCRIPT)], env=environment(tmpdir_of_the_run), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "runs on this CPU" in done.stdout or "rebuilt" in done.stdout, done.stdout
    assert list(tmpdir_of_the_run.iterdir()) == []


def test_a_script_stopped_midway_leaves_no_temporary_folder(tmpdir_of_the_run: Path) -> None:
    running = subprocess.Popen(
        ["bash", str(SCRIPT)], env=environment(tmpdir_of_the_run), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while not list(tmpdir_of_the_run.rglob("engram-probe-*")) and running.poll() is None:  # the probe has begun
        assert time.monotonic() < deadline, "the probe did not start"
        time.sleep(0.05)
    running.send_signal(signal.SIGTERM)  # the script alone: it ends once the probe it waits for has stopped its server
    assert running.wait(timeout=300) == 128 + signal.SIGTERM
    assert list(tmpdir_of_the_run.iterdir()) == []
