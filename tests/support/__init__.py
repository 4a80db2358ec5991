"""What the tests share besides fixtures (tests/conftest.py): chatting with an agent (chat.py), the Letta SDK
(letta.py), the app served on a port (served.py), and where things are."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
DATA = ROOT / "tests" / "data"
