"""The client commands (`engram chat | agents | memory | export | import`), in-process against the app and, for
chat, as real processes: `engram chat` talking to `engram serve`."""

import io
import json
import os
import subprocess
import sys
import unicodedata
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer

from app.cli import client as cli_client
from app.cli import main, terminal
from app.cli import memory as cli_memory
from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, tools
from testkit.service_process import running_service
from tests.support import DATA
from tests.support.database import create_database
from tests.support.service import Cli, checked_client, cli_api, forget_agents_named


def in_order(output: str, *parts: str) -> None:
    """Each part appears in the output, each after the one before."""
    position = 0
    for part in parts:
        found = output.find(part, position)
        assert found >= 0, f"{part!r} not found after position {position} in:\n{output}"
        position = found + len(part)


TURN_SCRIPT = (
    tools(call("core_memory_append", label="human", content="名前: 太郎"), content="名前を覚えておく。"),
    tools(call("send_message", text="よろしく、太郎さん！")),
)
STEPS = (
    "you> 僕の名前は太郎です。",
    "thinking 名前を覚えておく。",
    '→ core_memory_append {"label": "human", "content": "名前: 太郎"}',
    "← core_memory_append ok",
    "Block 'human' updated",
    "> よろしく、太郎さん！",  # written as it streamed: its send_message call and result would repeat it
    "(end_turn · 2 LLM calls",
)


def test_chat_prints_each_step_in_order(cli: Cli, agent: dict, llm: ScriptedLLM, capsys: pytest.CaptureFixture[str]) -> None:
    llm.reset(*TURN_SCRIPT)
    cli("chat", agent["id"], "-m", "僕の名前は太郎です。")
    out = capsys.readouterr().out
    in_order(out, *STEPS)
    assert "send_message" not in out  # the reply streamed (message_delta events), so its call was not repeated


def test_chat_process_against_a_running_service(postgres_server: PostgresServer, llm: ScriptedLLM) -> None:
    """Two real processes: `engram chat` streams a turn from `engram serve`, which drives the scripted LLM."""
    env = {
        "DATABASE_URL": create_database(postgres_server, f"engram_cli_{uuid.uuid4().hex[:8]}"),
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "test",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_LLM_MAX_RETRIES": "0",
    }
    with running_service(env) as base:
        agent = httpx.post(f"{base}/v1/agents", json={"name": "ハナ"}).json()
        llm.reset(*TURN_SCRIPT)
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "chat", "ハナ", "-m", "僕の名前は太郎です。"],
            env={**os.environ, "ENGRAM_URL": base, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        in_order(done.stdout, *STEPS[:-2], "ハナ> よろしく、太郎さん！", STEPS[-1])
        memory = httpx.get(f"{base}/v1/agents/{agent['id']}/memory").json()["blocks"]
        assert {b["label"]: b["value"] for b in memory}["human"] == "名前: 太郎"
        missing = subprocess.run(
            [sys.executable, "-m", "app.cli", "chat", "nobody", "-m", "hello"],
            env={**os.environ, "ENGRAM_URL": base},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert missing.returncode == 1 and "no agent with the id or name 'nobody'" in missing.stderr


def test_agents_ls_create_rm(
    cli: Cli, client: TestClient, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"cli-agent-{uuid.uuid4().hex[:6]}"
    cli("agents", "create", name, "--system", "Answer briefly.")
    agent_id = capsys.readouterr().out.strip()
    assert client.get(f"/v1/agents/{agent_id}").json()["system"] == "Answer briefly."
    cli("agents", "ls")
    in_order(capsys.readouterr().out, "name", "id", name, agent_id, "human, persona")
    cli("agents", "ls", "--json")
    assert agent_id in {a["id"] for a in json.loads(capsys.readouterr().out)}

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal: nobody to ask
    with pytest.raises(SystemExit, match="--yes"):
        cli("agents", "rm", name)
    assert client.get(f"/v1/agents/{agent_id}").status_code == 200
    cli("agents", "rm", name, "--yes")
    assert client.get(f"/v1/agents/{agent_id}").status_code == 404
    with pytest.raises(SystemExit, match="no agent with the id or name"):
        cli("agents", "rm", name, "--yes")


def test_memory_show(cli: Cli, agent: dict, client: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    client.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "名前: [bold]太郎[/bold]"})
    cli("memory", "show", agent["id"])
    in_order(capsys.readouterr().out, "human  19/2000 chars · version 2", "名前: [bold]太郎[/bold]", "persona")
    cli("memory", "show", agent["id"], "human")
    shown = capsys.readouterr()
    assert shown.out == "名前: [bold]太郎[/bold]\n" and "version 2" in shown.err
    with pytest.raises(SystemExit, match="no block 'nothing'"):
        cli("memory", "show", agent["id"], "nothing")


def test_recall_prints_what_a_model_would_be_handed(
    cli: Cli, agent: dict, client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = ["The user's cat is called Mochi.", "ユーザーは卵アレルギーがあります。"]
    client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": [{"content": f} for f in facts]})
    cli("recall", agent["id"], "卵は食べられる？", "--no-core")
    out, err = capsys.readouterr()
    assert out.startswith("## Possibly relevant memories") and facts[1] in out and "Mochi" not in out
    assert "1 memories" in err
    cli("recall", agent["id"], "What is my cat called?", "--json", "--max-chars", "200")
    answer = json.loads(capsys.readouterr().out)
    assert answer["memories"][0]["content"] == facts[0] and answer["chars"] <= 200
    cli("recall", agent["id"], "Who wrote Pride and Prejudice?", "--no-core")
    out, err = capsys.readouterr()
    assert out == "" and "no memory bears on this" in err
    client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user's dog is called Pochi.", "tags": ["pets"]})
    cli("recall", agent["id"], "What are my pets called?", "--json", "--tag", "pets")
    assert [m["content"] for m in json.loads(capsys.readouterr().out)["memories"]] == ["The user's dog is called Pochi."]
    with pytest.raises(SystemExit, match="max_chars"):
        cli("recall", agent["id"], "cats", "--max-chars", "0")


def raw_controls(text: str) -> list[str]:
    """The control characters in printed text that a terminal would act on (newline and tab lay it out)."""
    return [c for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"]


def test_stored_control_characters_reach_the_terminal_escaped(
    cli: Cli, client: TestClient, llm: ScriptedLLM, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory, a name or a reply holding ESC, BEL or C1 codes cannot recolour, retitle or rewrite the terminal."""
    monkeypatch.setattr(terminal, "stdout_is_terminal", lambda: True)
    name = f"Aiko\x1b]0;pwned\x07 {uuid.uuid4().hex[:6]}"
    agent = client.post("/v1/agents", json={"name": name}).json()
    hostile = "The user's cat is called Mochi.\x1b[31m\x07\x9b2J"
    client.post(f"/v1/agents/{agent['id']}/archival", json={"content": hostile})
    client.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "Name: Taro\x1b[31m\x07", "description": "\x1b[2J"})
    llm.reset(tools(call("send_message", text="Mochi\x1b[31m\x07")))
    for argv in (
        ("recall", agent["id"], "What is my cat called?"),
        ("memory", "show", agent["id"]),
        ("memory", "show", agent["id"], "human"),
        ("agents", "ls"),
        ("chat", agent["id"], "-m", "What is my cat called?"),
    ):
        cli(*argv)
        out, err = capsys.readouterr()
        assert raw_controls(out + err) == [], (argv, out, err)
        assert "\\x1b[31m\\x07" in out or "\\x1b]0;pwned\\x07" in out, (argv, out)
    with pytest.raises(SystemExit) as refused:
        cli("memory", "show", name, "nothing")
    assert raw_controls(str(refused.value.code)) == [] and "\\x1b]0;pwned\\x07" in str(refused.value.code)

    # Piped or redirected, a value alone on stdout is the data itself, whole; what goes to the terminal stays escaped.
    monkeypatch.setattr(terminal, "stdout_is_terminal", lambda: False)
    cli("memory", "show", agent["id"], "human")
    out, err = capsys.readouterr()
    assert out == "Name: Taro\x1b[31m\x07\n" and raw_controls(err) == []

    # As JSON: still valid, the stored text whole once parsed, no control character raw on the terminal.
    cli("recall", agent["id"], "What is my cat called?", "--json")
    out = capsys.readouterr().out
    assert raw_controls(out) == [] and hostile in [m["content"] for m in json.loads(out)["memories"]]


def test_memory_edit_in_editor_saves_with_if_match(
    cli: Cli, agent: dict, client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    editor = tmp_path / "editor.py"  # an "editor" that rewrites the file it is given, as a person would
    editor.write_text("import sys\nopen(sys.argv[1], 'w', encoding='utf-8').write('名前: 花子\\n')\n")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    cli("memory", "edit", agent["id"], "human")
    assert "saved human: version 1 → 2" in capsys.readouterr().err
    block = next(b for b in client.get(f"/v1/agents/{agent['id']}/memory").json()["blocks"] if b["label"] == "human")
    assert (block["value"], block["version"]) == ("名前: 花子", 2)  # the editor's final newline is not kept
    cli("memory", "edit", agent["id"], "human")  # saving the same text again changes nothing
    assert "no change to human (version 2)" in capsys.readouterr().err

    monkeypatch.setenv("EDITOR", f"{sys.executable} -c 'raise SystemExit(3)'")
    with pytest.raises(SystemExit, match="status 3; nothing saved"):
        cli("memory", "edit", agent["id"], "human")


def test_memory_edit_does_not_overwrite_a_concurrent_change(
    cli: Cli, agent: dict, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def edit_while_someone_else_saves(path: Path) -> None:
        path.write_text("mine", encoding="utf-8")
        assert client.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "theirs"}).status_code == 200

    monkeypatch.setattr(cli_memory, "launch_editor", edit_while_someone_else_saves)
    with pytest.raises(SystemExit) as refused:
        cli("memory", "edit", agent["id"], "human")
    message = str(refused.value)
    assert "changed on the server while you edited it (version 1 → 2); nothing was overwritten" in message
    kept = Path(message.split("Your text is in ")[1].split(":")[0])
    assert kept.read_text(encoding="utf-8") == "mine"
    kept.unlink()
    block = next(b for b in client.get(f"/v1/agents/{agent['id']}/memory").json()["blocks"] if b["label"] == "human")
    assert (block["value"], block["version"]) == ("theirs", 2)


def test_export_and_import_commands(
    cli: Cli, agent: dict, client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "名前: 太郎"})
    client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "太郎の好きな食べ物はラーメン"})
    target = tmp_path / "agent.json"
    cli("export", agent["id"], "-o", str(target))
    document = json.loads(target.read_text())
    assert document["format"] == "engram.agent" and document["agent"]["id"] == agent["id"]
    assert "exporting" in capsys.readouterr().err  # the progress bar, on stderr

    cli("export", agent["id"], "--no-embeddings")  # to stdout
    assert json.loads(capsys.readouterr().out)["passages"][0]["embedding"] is None

    cli("import", str(target), "--name", "Imported by the CLI")
    out = capsys.readouterr().out
    in_order(out, "imported Imported by the CLI as ", "(from an Engram export)", "2 blocks (3 revisions), 1 passages")
    new_id = out.split(" as ")[1].split()[0]
    memory = {b["label"]: b["value"] for b in client.get(f"/v1/agents/{new_id}/memory").json()["blocks"]}
    assert memory["human"] == "名前: 太郎"

    forget_agents_named(client, "customer_service")
    cli("import", str(DATA / "letta-af" / "customer_service.af"))
    in_order(
        capsys.readouterr().out,
        "imported customer_service as",
        "(from a Letta agent file)",
        "memory_replace → core_memory_replace",
        "skipped tools (Engram has none like them): ",
        "cancel_order",
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "engram.agent", "version": 1}')
    with pytest.raises(SystemExit, match="422 invalid_request: invalid agent document: .*agent: Field required"):
        cli("import", str(bad))


def test_chat_reads_messages_until_exit(
    cli: Cli, agent: dict, llm: ScriptedLLM, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.reset(tools(call("send_message", text="一つ目")), tools(call("send_message", text="二つ目")))
    monkeypatch.setattr(sys, "stdin", io.StringIO("こんにちは\n\nもう一度\n/exit\nnever sent\n"))
    cli("chat", agent["id"])
    in_order(capsys.readouterr().out, f"chatting with {agent['name']}", "> 一つ目", "> 二つ目")
    assert llm.remaining == 0 and len(llm.requests) == 2  # the empty line sent nothing, nor did what followed /exit


def test_import_over_the_request_limit_says_what_to_do(
    settings: Settings, embedder: Embedder, agent: dict, client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = client.get(f"/v1/agents/{agent['id']}/export").json()
    target = tmp_path / "agent.json"
    target.write_text(json.dumps(document))
    with checked_client(create_app(settings.model_copy(update={"max_request_bytes": 1000}), embedder=embedder)) as small:

        @contextmanager
        def connect(args: object) -> Iterator[cli_client.Api]:
            yield cli_api(small)

        monkeypatch.setattr(cli_client, "connect", connect)
        with pytest.raises(SystemExit, match="over the server's request limit .*ENGRAM_MAX_REQUEST_BYTES.*--no-embeddings"):
            main(["import", str(target)])


def test_a_refused_key_names_the_flag_not_the_header() -> None:
    refused = httpx.Response(401, json={"error": "unauthorized", "detail": "send an API key as Authorization: Bearer"})
    message = str(cli_client.failure(refused))
    assert "--key or ENGRAM_API_KEY" in message and message.startswith("engram: the server answered 401")
