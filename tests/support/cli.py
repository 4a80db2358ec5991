"""Running `engram` as its own process, as a user's terminal would."""

import os
import subprocess
import sys


def engram(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`engram ARGV…` as its own process; without DATABASE_URL in env, against the embedded database of
    ENGRAM_DATA_DIR."""
    inherited = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ENGRAM_DATABASE_URL")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *argv],
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def refused(result: subprocess.CompletedProcess[str], *reason: str) -> None:
    """The command failed with exactly one line on stderr, which says each part of the reason."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("engram: "), result.stderr
    for part in reason:
        assert part in lines[0], lines[0]
