"""The README's "Memory for your own LLM" quickstart, run as written (a separate Python process) against a served
Engram, with the scripted LLM standing in for the model behind the openai SDK: the README cannot rot. It runs twice
on the same service, as a user's script does: the second run finds its agent and goes on remembering."""

import os
import subprocess
import sys
import uuid

from app.agents.schemas import DEFAULT_PERSONA
from app.llm.embeddings import Embedder
from app.memory.recollection.prompt_text import RECOLLECTION_HEADING
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, text
from tests.support.database import run_sql
from tests.support.readme import readme_block
from tests.support.served import Served

REPLIES = ["Happy early birthday to Mochi!", "大阪ですね、了解です。", "Mochi's birthday is 12 May."]
SYSTEM = "You are Aiko's assistant.\n\n"


def quickstart() -> str:
    return readme_block("quickstart", "python")


def memories_of(prompt: str) -> str:
    """The recollected lines of a system prompt ("" when none were handed over)."""
    return prompt.split("<memories>\n", 1)[1].split("\n</memories>", 1)[0] if "<memories>" in prompt else ""


def test_the_readme_quickstart_hands_the_model_what_it_was_told_and_runs_again(
    settings: Settings, embedder: Embedder, llm: ScriptedLLM
) -> None:
    llm.reset(*(text(reply) for reply in REPLIES * 2))
    with Served(settings, embedder) as served:
        env = {**os.environ, "ENGRAM_URL": served.url, "OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "scripted", "MODEL": "m"}
        runs = [
            subprocess.run([sys.executable, "-c", quickstart()], env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)
        ]
        with served.api() as api:
            agents = api.get("/v1/agents", params={"name": "Aiko's assistant"}).json()["items"]
            agent = agents[0]["id"]
            said = api.get(f"/v1/agents/{agent}/messages", params={"limit": 50}).json()["items"]
            stored = "SELECT external_id, role, content FROM messages WHERE agent_id = :a ORDER BY seq"
            assert settings.database_url
            rows = run_sql(settings.database_url, stored, {"a": uuid.UUID(agent)})
            # a retried hand-in (the first exchange again, under the ids the script gave it) is not stored again
            retried = [{"role": role, "content": content, "id": given} for given, role, content in rows[:2]]
            retry = api.post(f"/v1/agents/{agent}/messages", json={"messages": retried}).json()
            after_retry = len(api.get(f"/v1/agents/{agent}/messages", params={"limit": 50}).json()["items"])
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == REPLIES
    prompts = [r["messages"][0]["content"] for r in llm.requests]
    assert len(prompts) == 6 and all(p.startswith(SYSTEM) for p in prompts)
    # the model is handed memory as data: no Engram persona, no word of tools it does not have
    for prompt in prompts:
        assert "<persona" not in prompt and DEFAULT_PERSONA[:30] not in prompt and "search for more" not in prompt
    # the first run: nothing remembered yet, so nothing handed over; then the birthday for the birthday question
    first, _, third = prompts[:3]
    assert first == SYSTEM
    assert third.startswith(SYSTEM + RECOLLECTION_HEADING)  # no core memory yet: `human` is empty
    assert "- user: My cat Mochi turns three on 12 May." in memories_of(third)
    assert "大阪" not in memories_of(third)  # the move bears on nothing asked

    # the second run found the agent (one agent of that name) and stored its exchanges beside the first run's
    assert len(agents) == 1
    assert len(said) == 12 and all(m["handed_in"] for m in said)
    assert len({given for given, _, _ in rows}) == 12 and all(given for given, _, _ in rows)
    assert rows[0][0].endswith("/user") and rows[0][0].removesuffix("/user") == rows[1][0].removesuffix("/assistant")
    # what changes: the second run's first message, told before, now brings back the first run's exchange about
    # Mochi (its own words are not handed back: the model has them in front of it)
    again_first, _, again_third = prompts[3:]
    assert "Mochi" in memories_of(again_first)
    assert "- user: My cat Mochi turns three on 12 May." not in memories_of(again_first)
    assert "- user: My cat Mochi turns three on 12 May." in memories_of(again_third)
    assert "Mochi's birthday is 12 May." in memories_of(again_third)  # the first run's answer, said since
    assert (retry["stored"], retry["already_stored"]) == (0, 2) and after_retry == 12
