"""The README's "Facts, and where each came from", run as written after the quickstart it is added to (one Python
process, twice, as a user's script runs) against a served Engram whose memory pass runs the scripted LLM, as the
quickstart's model does: the pass reads the handed-in lines with their references, cites them, and the script prints
each fact with the lines it came from, as the README's comments show."""

import os
import re
import subprocess
import sys
from typing import Any

from app.llm.embeddings import Embedder
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.support import matched
from tests.support.readme import readme_block
from tests.support.served import Served
from tests.support.service import forget_agents_named

AGENT = "Aiko's assistant"  # the quickstart's
REPLIES = ["Happy early birthday to Mochi!", "大阪ですね、了解です。", "Mochi's birthday is 12 May."]


def script() -> str:
    return readme_block("quickstart", "python") + "\n" + readme_block("facts", "python")


def documented_output() -> list[str]:
    """What the facts block's comments say it prints (the lines that begin with "# ")."""
    return [line.removeprefix("# ") for line in readme_block("facts", "python").splitlines() if line.startswith("# ")]


def cited(request: dict[str, Any], *said: str) -> list[str]:
    """The references the pass's transcript gives the lines that say `said`."""
    transcript = request["messages"][1]["content"]
    return [matched(re.search(rf"^\[(m\d+)\] \[[^]]+\] \w+: {re.escape(line)}", transcript, re.M)).group(1) for line in said]


def storing(content: str, *said: str, occurred_at: str | None = None) -> Any:
    """A scripted step of the pass: store `content`, citing the lines that say `said`."""
    dated = {"occurred_at": occurred_at} if occurred_at else {}
    return lambda request: tools(call("archival_memory_create", content=content, sources=cited(request, *said), **dated))


def test_the_readme_facts_are_stored_with_the_lines_they_came_from_and_run_again(
    settings: Settings, embedder: Embedder, llm: ScriptedLLM
) -> None:
    first_pass = [
        storing("Aiko's cat Mochi turns three on 12 May.", "My cat Mochi turns three on 12 May."),
        storing("Aiko is moving to Osaka next month.", "来月、大阪に引っ越します。"),
        storing(
            "Aiko adopted a black kitten, Kuro, on 2024-06-02.",
            "We adopted a black kitten on Sunday: Kuro.",
            occurred_at="2024-06-02",
        ),
        storing(
            "Mochi hisses at Kuro for now.",
            "Welcome, Kuro! How is Mochi taking it?",
            "She hisses at him, but she'll get used to him.",
            occurred_at="2024-06-02",
        ),
        text("Stored four facts."),
    ]
    again = [*(text(reply) for reply in REPLIES), text("Nothing new to keep.")]
    llm.reset(*(text(reply) for reply in REPLIES), *first_pass, *again)
    with Served(settings, embedder) as served, served.api() as api:
        # Tests share one database, and the quickstart's test runs the same script: its agent goes before and after.
        forget_agents_named(api, AGENT)
        env = {**os.environ, "ENGRAM_URL": served.url, "OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "scripted", "MODEL": "m"}
        try:
            runs = [
                subprocess.run([sys.executable, "-c", script()], env=env, capture_output=True, text=True, timeout=120)
                for _ in range(2)
            ]
            [agent] = api.get("/v1/agents", params={"name": AGENT}).json()["items"]
            facts = api.get(f"/v1/agents/{agent['id']}/archival").json()["items"]
            listed = api.get(f"/v1/agents/{agent['id']}/messages", params={"limit": 50}).json()["items"]
        finally:
            forget_agents_named(api, AGENT)
    said = {m["id"]: m["content"] for m in listed}

    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == [*REPLIES, *documented_output()]
    assert llm.remaining == 0 and len(llm.requests) == 3 + 5 + 3 + 1
    # The first pass read every line said so far, each after its reference: ask()'s exchanges, then those handed in.
    transcript = llm.requests[3]["messages"][1]["content"].splitlines()[1:]
    assert [line.split(" ", 1)[0] for line in transcript] == [f"[m{i}]" for i in range(1, 10)]
    assert transcript[-1].endswith("user: She hisses at him, but she'll get used to him.")
    # The second read only what was said since: the second run's exchanges (the hand-in stored nothing again).
    since = llm.requests[11]["messages"][1]["content"].splitlines()[1:]
    assert len(since) == 6 and not any("Kuro" in line for line in since)
    # The facts' sources are the messages' ids; the kitten is dated when it was said.
    by_content = {f["content"]: f for f in facts}
    assert [said[s] for s in by_content["Mochi hisses at Kuro for now."]["sources"]] == [
        "Welcome, Kuro! How is Mochi taking it?",
        "She hisses at him, but she'll get used to him.",
    ]
    assert by_content["Aiko adopted a black kitten, Kuro, on 2024-06-02."]["occurred_at"].startswith("2024-06-02")
