"""The README's "Memory for your own LLM" quickstart, run as written (a separate Python process) against a served
Engram, with the scripted LLM standing in for the model behind the openai SDK: the README cannot rot."""

import os
import re
import subprocess
import sys

from app.llm.embeddings import Embedder
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, text
from tests.support import ROOT
from tests.support.served import Served

README = ROOT / "README.md"


def quickstart() -> str:
    marked = README.read_text().split("<!-- quickstart:", 1)[1]
    return re.search(r"```python\n(.*?)```", marked, re.S).group(1)  # type: ignore[union-attr]


def test_the_readme_quickstart_hands_the_model_what_it_was_told(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    llm.reset(text("Happy early birthday to Mochi!"), text("大阪ですね、了解です。"), text("Mochi's birthday is 12 May."))
    with Served(settings, embedder) as served:
        env = {**os.environ, "ENGRAM_URL": served.url, "OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "scripted", "MODEL": "m"}
        run = subprocess.run([sys.executable, "-c", quickstart()], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["Happy early birthday to Mochi!", "大阪ですね、了解です。", "Mochi's birthday is 12 May."]
    first, _, third = (r["messages"][0]["content"] for r in llm.requests)
    assert "<memories>" not in first  # nothing remembered yet: nothing handed over
    memories = third.split("<memories>", 1)[1]
    assert "- user: My cat Mochi turns three on 12 May." in memories
    assert "大阪" not in memories  # the move bears on nothing asked
    assert third.startswith("You are Aiko's assistant.\n\n## Core memory")
