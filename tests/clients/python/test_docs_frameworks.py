"""docs/clients.md's OpenAI Agents SDK and LangGraph sections, run as written (each its own Python process, twice, as
a reader may run it) against the served Engram, their model the scripted LLM at OPENAI_BASE_URL: each prints what its
comments say, and the model is handed what memory holds (the recorded requests); the Agents SDK's type-checks."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.clients.python.test_docs import documented_output
from tests.support import ROOT
from tests.support.readme import readme_block
from tests.support.served import Served
from tests.support.service import forget_agents_named

DOCS = ROOT / "docs" / "clients.md"
FACT = "Aiko's cat Mochi turns three on 12 May."


def run_twice(block: str, service: Served, llm: ScriptedLLM) -> list[str]:
    """The block's output on each of two runs, and the requests the scripted LLM was sent in the second."""
    env = {
        **os.environ,
        "ENGRAM_URL": service.url,
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "scripted",
        "MODEL": "scripted",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the SDK's traces would go to OpenAI
    }
    outputs = []
    for _ in range(2):
        llm.requests.clear()
        run = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout)
    return outputs


@pytest.fixture
def clean(service: Served) -> Iterator[None]:
    """The sections' agents, as a reader's first run finds them: none."""
    with service.api() as api:
        for name in ("Aiko's assistant", "Aiko"):
            forget_agents_named(api, name)
        yield
        for name in ("Aiko's assistant", "Aiko"):
            forget_agents_named(api, name)


def test_the_openai_agents_section_runs_and_the_second_session_is_handed_the_fact(
    service: Served, llm: ScriptedLLM, clean: None
) -> None:
    block = readme_block("openai-agents", "python", DOCS)
    replies = [tools(call("remember", fact=FACT)), text("Noted: Mochi turns three on 12 May."), text("On 12 May.")]
    llm.reset(*replies, *replies)
    for output in run_twice(block, service, llm):
        assert output.splitlines() == documented_output(block)
    asked = llm.requests[-1]["messages"]
    assert asked[0]["role"] == "system" and FACT in asked[0]["content"]
    assert asked[-1] == {"role": "user", "content": "When is Mochi's birthday?"}


def test_the_langgraph_section_runs_and_the_model_is_handed_the_stored_item(
    service: Served, llm: ScriptedLLM, clean: None
) -> None:
    block = readme_block("langgraph", "python", DOCS)
    llm.reset(text("Green tea."), text("Green tea."))
    for output in run_twice(block, service, llm):
        assert output.splitlines() == documented_output(block)
    [request] = llm.requests
    assert request["messages"][0]["role"] == "system"
    assert "Aiko drinks green tea, never coffee." in request["messages"][0]["content"]
    assert request["messages"][1] == {"role": "user", "content": "What should I order for Aiko?"}


def test_the_openai_agents_section_type_checks(tmp_path: Path) -> None:
    script = tmp_path / "section.py"
    script.write_text(readme_block("openai-agents", "python", DOCS))
    checked = subprocess.run([sys.executable, "-m", "mypy", str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
