"""`engram agents ls | create | rm`."""

import argparse
import sys

from rich.console import Console
from rich.markup import escape
from rich.prompt import Confirm
from rich.table import Table
from rich.text import Text

from app.cli import client
from app.cli.terminal import json_text, visible


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    agents = sub.add_parser("agents", help="list, create and delete agents").add_subparsers(dest="agents_command", required=True)
    ls = agents.add_parser("ls", help="list the agents of your key's tenant")
    ls.add_argument("--json", action="store_true", help="print them as JSON")
    ls.set_defaults(run=_ls)
    create = agents.add_parser("create", help="create an agent (prints its id)")
    create.add_argument("name")
    create.add_argument("--system", help="extra instructions for its system prompt")
    create.add_argument("--model", help="its chat model (default: the server's ENGRAM_LLM_MODEL)")
    create.set_defaults(run=_create)
    rm = agents.add_parser("rm", help="delete an agent and all of its memory")
    rm.add_argument("agent", help="agent id or name")
    rm.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    rm.set_defaults(run=_rm)
    for command in (ls, create, rm):
        client.add_connection_args(command)


def _ls(args: argparse.Namespace) -> None:
    with client.connect(args) as api:
        agents = api.agents()
    if args.json:
        print(json_text(agents))
        return
    table = Table(box=None, header_style="bold")
    table.add_column("name", overflow="fold")
    table.add_column("id", no_wrap=True, min_width=36)  # whole, to copy
    table.add_column("blocks", overflow="fold")
    table.add_column("created", no_wrap=True)
    for a in agents:
        blocks = ", ".join(b["label"] for b in a["blocks"])
        table.add_row(Text(visible(a["name"])), a["id"], blocks, a["created_at"][:19].replace("T", " "))
    Console(highlight=False).print(table if agents else "no agents yet: `engram agents create NAME`", markup=False)


def _create(args: argparse.Namespace) -> None:
    body = {
        "name": args.name,
        **({"system": args.system} if args.system else {}),
        **({"model": args.model} if args.model else {}),
    }
    with client.connect(args) as api:
        agent = api.json("POST", "/v1/agents", json=body)
    print(agent["id"])


def _rm(args: argparse.Namespace) -> None:
    with client.connect(args) as api:
        agent = api.agent(args.agent)
        if not args.yes:
            if not sys.stdin.isatty():
                raise SystemExit("engram: add --yes to delete without being asked")
            question = f"delete agent [bold]{escape(visible(agent['name']))}[/] ({agent['id']}) and all of its memory?"
            if not Confirm.ask(question, default=False):
                raise SystemExit("engram: nothing deleted")
        api.request("DELETE", f"/v1/agents/{agent['id']}")
    Console(stderr=True, highlight=False).print(f"deleted {visible(agent['name'])} ({agent['id']})", markup=False)
