"""The README's walkthrough ("Memory in five minutes"), run as written with `bash -euo pipefail` (curl and jq) against
a served Engram without any LLM, `localhost:8000` pointed at it: every command works and prints what its comment says
it prints."""

import re
import shutil
import subprocess

from app.llm.embeddings import Embedder
from app.settings import Settings
from tests.support import ROOT
from tests.support.served import Served

README = ROOT / "README.md"
NOTE = re.compile(r"\s{2,}\(.*\)$")  # "# 0          (why)": the output is "0"


def walkthrough() -> str:
    marked = README.read_text().split("<!-- walkthrough:", 1)[1]
    return re.search(r"```bash\n(.*?)```", marked, re.S).group(1)  # type: ignore[union-attr]


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


def test_the_readme_walkthrough_remembers_searches_and_supersedes(settings: Settings, embedder: Embedder) -> None:
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the README's walkthrough needs {', '.join(missing)} (.ci/run installs jq)"
    no_llm = settings.model_copy(update={"openai_base_url": None, "openai_api_key": None, "llm_model": None})
    with Served(no_llm, embedder) as served:
        script = walkthrough().replace("localhost:8000", served.url)
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    assert printed[0] == '{"stored":4}'
    # Recollection: the Japanese line an English question is about; nothing for a question memory knows nothing of.
    assert printed[1:4] == ["[conversation, 2024-05-01]", "- user: 来週の金曜日、京都で茶道の体験をします。", "</memories>"]
    assert printed[4] == "0"
    # Archival memory: stored, then found by a Japanese and by an English question.
    assert printed[5:8] == [
        "アイコの好きな食べ物は抹茶アイスです。",
        "アイコの好きな食べ物は抹茶アイスです。",
        "Aiko lives in Tokyo.",
    ]
    # Superseded: the new fact is stored; a search finds it and not the old one; with include_superseded, both.
    assert printed[8] == "Aiko moved to Osaka."
    assert printed[9] == "Aiko moved to Osaka." and not any("Tokyo" in line for line in printed[9:11])
    assert sorted(printed[11:]) == [
        '{"content":"Aiko lives in Tokyo.","valid_until":"2024-10-01T00:00:00Z"}',
        '{"content":"Aiko moved to Osaka.","valid_until":null}',
        '{"content":"アイコの好きな食べ物は抹茶アイスです。","valid_until":null}',
    ]
    assert printed == documented_output(walkthrough())  # and the README's comments show exactly that
