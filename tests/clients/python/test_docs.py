"""docs/clients.md's Python section, run as written (its own Python process, twice, as a reader may run it) against
a served Engram whose LLM is the scripted one: it prints what its comments say; and it type-checks (mypy --strict, the project's settings)."""

import os
import re
import subprocess
import sys
from pathlib import Path

from app.llm.embeddings import Embedder
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support import ROOT
from tests.support.readme import readme_block
from tests.support.served import Served
from tests.support.service import forget_agents_named

REPLY = "You live in Tokyo."


def section() -> str:
    return readme_block("python", "python", ROOT / "docs" / "clients.md")


def documented_output(block: str) -> list[str]:
    """What the block's comments say its prints print (a comment after a print call on its line)."""
    return [match.group(1) for match in re.finditer(r"print\(.*\)[ \t]+# (.*)$", block, re.M)]


def test_the_python_section_runs_and_prints_what_it_says(settings: Settings, embedder: Embedder, llm: ScriptedLLM) -> None:
    llm.reset(tools(call("send_message", text=REPLY)), tools(call("send_message", text=REPLY)))
    with Served(settings, embedder) as served, served.api() as api:
        forget_agents_named(api, "Aiko")  # the README's walkthrough uses the name too
        try:
            env = {**os.environ, "ENGRAM_URL": served.url}
            runs = [
                subprocess.run([sys.executable, "-c", section()], env=env, capture_output=True, text=True, timeout=120)
                for _ in range(2)
            ]
            [aiko] = api.get("/v1/agents", params={"name": "Aiko"}).json()["items"]
            said = api.get(f"/v1/agents/{aiko['id']}/messages", params={"limit": 50}).json()["items"]
            passages = api.get(f"/v1/agents/{aiko['id']}/archival").json()["items"]
        finally:
            forget_agents_named(api, "Aiko")
    shown = documented_output(section())
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == [*shown[:2], REPLY, *shown[2:]]
    # The second run found Aiko and stored nothing twice: two turns' messages beside the two handed in.
    assert [m["content"] for m in said if m["handed_in"]] == [
        "素敵ですね！楽しんでください。",
        "来週の金曜日、京都で茶道の体験をします。",
    ]
    assert [p["content"] for p in passages] == ["Aiko lives in Tokyo."]


def test_the_python_section_type_checks(tmp_path: Path) -> None:
    script = tmp_path / "section.py"
    script.write_text(section())
    checked = subprocess.run([sys.executable, "-m", "mypy", str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
