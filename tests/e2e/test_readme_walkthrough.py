"""The README's walkthrough ("Memory in five minutes"), run as written with `bash -euo pipefail` (curl and jq) against
a served Engram without any LLM, `localhost:8000` pointed at it: every command works and prints what its comment says
it prints, and the block runs again on the same service, as a reader may run it."""

import re
import shutil
import subprocess

from app.llm.embeddings import Embedder
from app.settings import Settings
from tests.support.readme import readme_block
from tests.support.served import Served

NOTE = re.compile(r"\s{2,}\(.*\)$")  # "# 0          (why)": the output is "0"


def walkthrough() -> str:
    return readme_block("walkthrough", "bash")


def documented_output(block: str) -> list[str]:
    """What the comments say the block prints: those that follow a command (a comment after a blank line introduces
    the next commands instead), without a note in parentheses."""
    shown: list[str] = []
    after_command = False
    for line in block.splitlines():
        if not line.strip():
            after_command = False
        elif not line.startswith("#"):
            after_command = True
        elif after_command:
            shown.append(NOTE.sub("", line.removeprefix("# ")))
    return shown


def test_the_readme_walkthrough_remembers_searches_and_supersedes_and_runs_again(settings: Settings, embedder: Embedder) -> None:
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the README's walkthrough needs {', '.join(missing)} (.ci/run installs jq)"
    no_llm = settings.model_copy(update={"openai_base_url": None, "openai_api_key": None, "llm_model": None})
    with Served(no_llm, embedder) as served:
        script = walkthrough().replace("localhost:8000", served.url)
        first, second = (
            subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=120)
            for _ in range(2)
        )
        with served.api() as api:
            aiko = api.get("/v1/agents", params={"name": "Aiko"}).json()["items"]
            again = api.post(f"/v1/agents/{aiko[0]['id']}/recollection", json={"query": "What am I doing in Kyoto next week?"})
            said = api.get(f"/v1/agents/{aiko[0]['id']}/messages", params={"limit": 50}).json()["items"]
    assert first.returncode == 0, first.stderr
    printed = first.stdout.splitlines()
    assert printed[0] == '{"stored":4,"already_stored":0}'
    # Recollection: the Japanese line an English question is about; nothing for a question memory knows nothing of.
    assert printed[1:3] == ["[conversation, 2024-05-01]", "- user: 来週の金曜日、京都で茶道の体験をします。"]
    assert printed[3] == "0"
    # Archival memory: stored, then found by a Japanese and by an English question.
    assert printed[4:7] == [
        "アイコの好きな食べ物は抹茶アイスです。",
        "アイコの好きな食べ物は抹茶アイスです。",
        "Aiko lives in Tokyo.",
    ]
    # Superseded: the new fact is stored; a search finds it and not the old one; with include_superseded, both.
    assert printed[7] == "Aiko moved to Osaka."
    assert printed[8] == "Aiko moved to Osaka." and not any("Tokyo" in line for line in printed[8:10])
    history = [
        '{"content":"Aiko lives in Tokyo.","valid_until":"2024-10-01T00:00:00Z"}',
        '{"content":"Aiko moved to Osaka.","valid_until":null}',
        '{"content":"アイコの好きな食べ物は抹茶アイスです。","valid_until":null}',
    ]
    assert sorted(printed[10:]) == history
    assert printed == documented_output(walkthrough())  # and the README's comments show exactly that

    # Run again, as the README says: Aiko is found by name, not created twice; the messages, handed in under the same
    # ids, are not stored again; Tokyo, told and superseded again, is in the history twice (the old fact is current
    # nowhere: searches still find Osaka only); the matcha fact, a near-duplicate of a current one, is stored once.
    assert second.returncode == 0, second.stderr
    again_printed = second.stdout.splitlines()
    assert len(aiko) == 1 and len(said) == 4
    assert again_printed[0] == '{"stored":0,"already_stored":4}'
    assert again_printed[1:10] == printed[1:10]
    assert sorted(again_printed[10:]) == sorted([history[0], *history])
    # what changes in recollection: the facts stored by the first run come back beside the conversation's line
    assert again.status_code == 200, again.text
    recollected = [m["content"] for m in again.json()["memories"]]
    assert "来週の金曜日、京都で茶道の体験をします。" in recollected
    assert {m["kind"] for m in again.json()["memories"]} == {"recall", "archival"}
