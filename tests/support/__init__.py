"""What the tests share besides fixtures (tests/conftest.py): chatting with an agent (chat.py), the Letta SDK
(letta.py), the app served on a port (served.py), where things are, and a regex match a test counts on."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
DATA = ROOT / "tests" / "data"


def matched(match: re.Match[str] | None) -> re.Match[str]:
    """A match the test counts on: none fails it."""
    assert match is not None
    return match
