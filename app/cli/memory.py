"""`engram memory show AGENT [LABEL]`, `engram memory edit AGENT LABEL` (in $EDITOR, saved with If-Match: a block
that changed on the server meanwhile is not overwritten) and `engram recall AGENT QUESTION` (what the agent would
have in front of it before answering: POST …/recollection)."""

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from app.cli import client
from app.cli.terminal import for_stdout, json_text, visible


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    memory = sub.add_parser("memory", help="read and edit an agent's core memory").add_subparsers(
        dest="memory_command", required=True
    )
    show = memory.add_parser("show", help="print the core memory blocks (with LABEL: that block's value alone)")
    show.add_argument("agent", help="agent id or name")
    show.add_argument("label", nargs="?")
    show.set_defaults(run=_show)
    edit = memory.add_parser("edit", help="edit a block in $EDITOR; saved only if nobody changed it meanwhile")
    edit.add_argument("agent", help="agent id or name")
    edit.add_argument("label")
    edit.set_defaults(run=_edit)
    recall = sub.add_parser(
        "recall", help="print what an agent remembers that bears on a question, as a model would be handed it"
    )
    recall.add_argument("agent", help="agent id or name")
    recall.add_argument("question", help="the message a model is about to answer")
    recall.add_argument("--max-chars", type=int, help="characters of recollected memory at most (default: the server's)")
    recall.add_argument("--no-core", action="store_true", help="without core memory")
    recall.add_argument("--as-of", help="memory as it stood then (ISO 8601)")
    recall.add_argument(
        "--tag", action="append", dest="tags", help="only archival passages with this tag (repeat for several; all must match)"
    )
    recall.add_argument("--json", action="store_true", help="the whole answer as JSON (text, memories, chars)")
    recall.set_defaults(run=_recall)
    for command in (show, edit, recall):
        client.add_connection_args(command)


def _blocks(api: client.Api, agent: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["label"]: b for b in api.json("GET", f"/v1/agents/{agent['id']}/memory")["blocks"]}


def _block(api: client.Api, agent: dict[str, Any], label: str) -> dict[str, Any]:
    blocks = _blocks(api, agent)
    if label not in blocks:
        raise SystemExit(f"engram: {agent['name']} has no block {label!r} (blocks: {', '.join(blocks) or 'none'})")
    return blocks[label]


def _about(block: dict[str, Any]) -> str:
    flags = " · read-only" if block["read_only"] else ""
    return f"{block['label']}  {len(block['value'])}/{block['limit']} chars · version {block['version']}{flags}"


def _show(args: argparse.Namespace) -> None:
    with client.connect(args) as api:
        agent = api.agent(args.agent)
        if args.label:  # the value alone on stdout (to pipe or redirect), what it is on stderr
            block = _block(api, agent, args.label)
            Console(stderr=True, highlight=False).print(Text(_about(block), "dim"))
            sys.stdout.write(for_stdout(block["value"]) + ("" if block["value"].endswith("\n") else "\n"))
            return
        blocks = _blocks(api, agent)
    console = Console(highlight=False)
    console.print(Text(f"{visible(agent['name'])} ({agent['id']})", "bold"))
    for block in blocks.values():
        body = [Text(visible(block["value"]) or "(empty)", "" if block["value"] else "dim")]
        if block["description"]:
            body.insert(0, Text(visible(block["description"]), "dim italic"))
        console.print(Panel(Group(*body), title=Text(_about(block)), title_align="left"))


def launch_editor(path: Path) -> None:
    """$VISUAL or $EDITOR (with its arguments), else vi, on the file; returns when the editor exits."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    status = subprocess.run([*shlex.split(editor), str(path)], check=False).returncode
    if status != 0:
        raise SystemExit(f"engram: the editor exited with status {status}; nothing saved")


def _edit(args: argparse.Namespace) -> None:
    console = Console(stderr=True, highlight=False)
    with client.connect(args) as api:
        agent = api.agent(args.agent)
        block = _block(api, agent, args.label)
        fd, name = tempfile.mkstemp(prefix=f"engram-{block['label']}-", suffix=".txt")
        path = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(block["value"])
        try:
            launch_editor(path)
            value = path.read_text(encoding="utf-8")
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        if value.endswith("\n") and not block["value"].endswith("\n"):
            value = value[:-1]  # the newline editors add at the end of the last line
        if value == block["value"]:
            path.unlink()
            console.print(f"no change to {block['label']} (version {block['version']})", markup=False)
            return
        response = api.request(
            "PUT",
            f"/v1/agents/{agent['id']}/memory/{block['label']}",
            json={"value": value},
            headers={"If-Match": str(block["version"])},
            ok=(412, 422),
        )
        if response.status_code == 412:
            now = _block(api, agent, args.label)
            raise SystemExit(
                f"engram: {block['label']} changed on the server while you edited it (version {block['version']} → "
                f"{now['version']}); nothing was overwritten. Your text is in {path}: run `engram memory edit` again "
                "and merge it."
            )
        if response.status_code == 422:
            raise SystemExit(f"engram: not saved: {response.json().get('detail')}. Your text is in {path}.")
        saved = response.json()
    path.unlink()
    console.print(
        f"saved {saved['label']}: version {block['version']} → {saved['version']} ({len(saved['value'])}/{saved['limit']} chars)",
        markup=False,
    )


def _recall(args: argparse.Namespace) -> None:
    """The prompt-ready text on stdout (to pipe into a prompt), how much was recollected on stderr."""
    body: dict[str, Any] = {"query": args.question, "include_core": not args.no_core}
    if args.max_chars is not None:
        body["max_chars"] = args.max_chars
    if args.as_of:
        body["as_of"] = args.as_of
    if args.tags:
        body["tags"] = args.tags
    with client.connect(args) as api:
        agent = api.agent(args.agent)
        answer = api.json("POST", f"/v1/agents/{agent['id']}/recollection", json=body)
    if args.json:
        sys.stdout.write(json_text(answer) + "\n")
        return
    if answer["text"]:
        sys.stdout.write(for_stdout(answer["text"]) + "\n")
    found = len(answer["memories"])
    about = f"{found} memories, {answer['chars']} characters" if found else "no memory bears on this"
    Console(stderr=True, highlight=False).print(Text(f"{visible(agent['name'])}: {about}", "dim"))
