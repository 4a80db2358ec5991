"""`engram chat AGENT`: a terminal chat that shows each inner step of a turn as it streams (server-sent events of
`POST …/chat`): the agent's reasoning, each tool call with its arguments, each result, then the reply, growing as
the LLM writes it."""

import argparse
import json
from typing import Any

from rich.console import Console
from rich.text import Text

from app.chat.events import MessageDelta, MessageEvent, ReplyPieces, event_adapter
from app.cli import client
from app.cli.terminal import visible

RESULT_CHARS = 600  # a tool result longer than this is shown cut, with how much was left out
INLINE_ARGUMENTS = 100


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    chat = sub.add_parser("chat", help="chat with an agent in the terminal, watching each step it takes")
    chat.add_argument("agent", help="agent id or name")
    chat.add_argument("-m", "--message", action="append", help="send this message and exit (repeatable: one turn each)")
    client.add_connection_args(chat)
    chat.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    console = Console(highlight=False, soft_wrap=True)
    with client.connect(args) as api:
        agent = api.agent(args.agent)
        if args.message:
            for message in args.message:
                console.print(Text("you> ", "bold green") + Text(message))
                turn(api, agent, message, console)
            return
        console.print(Text(f"chatting with {visible(agent['name'])} ({agent['id']}); Ctrl-D or /exit ends", "dim"))
        while True:
            try:
                message = console.input("[bold green]you>[/] ")
            except (EOFError, KeyboardInterrupt):
                console.print()
                return
            if message.strip() in ("/exit", "/quit"):
                return
            if message.strip():
                try:
                    turn(api, agent, message, console)
                except KeyboardInterrupt:
                    console.print(Text("stopped watching; the turn runs on in the server", "yellow"))
                except SystemExit as refused:  # e.g. 409, the agent busy: say so and stay in the chat
                    console.print(Text(visible(str(refused)), "bold red"))


def turn(api: client.Api, agent: dict[str, Any], message: str, console: Console) -> None:
    with api.events("POST", f"/v1/agents/{agent['id']}/chat", json={"message": message}, timeout=None) as events:
        view = TurnView(agent["name"], console)
        for event in events:
            view.show(event.json())


class TurnView:
    """A turn's events on the terminal. The reply is written as it grows, on the agent's line; the `send_message`
    call and result of a reply that streamed, which would only repeat it, are left out."""

    def __init__(self, name: str, console: Console):
        self.name = visible(name)
        self.console = console
        self.reply = ReplyPieces()
        self.streamed: set[str] = set()  # send_message calls whose text was shown as it grew
        self.open_line = False  # the reply is being written on the current line

    def show(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in ("message_delta", "message"):
            piece = event_adapter.validate_python(event)
            assert isinstance(piece, MessageDelta | MessageEvent)
            begins, text = self.reply.piece(piece)
            if isinstance(piece, MessageDelta):
                self.streamed.add(piece.call_id)
            if begins:
                self._end_line()
                self.console.print(Text(f"{self.name}> ", "bold magenta"), end="")
            self.console.print(Text(visible(text)), end="")
            self.open_line = True
            if kind == "message":
                self._end_line()
            return
        self._end_line()
        if kind in ("tool_call", "tool_result") and event["call_id"] in self.streamed:
            return
        show(event, self.console)

    def _end_line(self) -> None:
        if self.open_line:
            self.console.print()
            self.open_line = False


def show(event: dict[str, Any], console: Console) -> None:
    kind = event.get("type")
    if kind == "reasoning":
        console.print(Text("  thinking ", "dim") + Text(visible(event["text"]), "dim italic"))
    elif kind == "tool_call":
        arguments = visible(json.dumps(event["arguments"], ensure_ascii=False))
        head = Text("  → ", "cyan") + Text(visible(event["name"]), "bold cyan")
        if len(arguments) <= INLINE_ARGUMENTS:
            console.print(head + Text(f" {arguments}", "cyan"))
        else:
            console.print(head)
            console.print(Text(_indent(visible(json.dumps(event["arguments"], ensure_ascii=False, indent=2)), 6), "cyan"))
    elif kind == "tool_result":
        style = "green" if event["ok"] else "red"
        console.print(
            Text("  ← ", style) + Text(visible(event["name"]), f"bold {style}") + Text(" ok" if event["ok"] else " error", style)
        )
        console.print(Text(_indent(visible(_cut(event["result"])), 6), "dim"))
    elif kind == "turn_completed":
        usage = event.get("usage") or {}
        console.print(
            Text(
                f"  ({event['stop_reason']} · {usage.get('llm_calls', 0)} LLM calls · "
                f"{usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} completion tokens)",
                "dim",
            )
        )
    elif kind == "error":
        console.print(Text(visible(f"  error {event['code']}: {event['detail']}"), "bold red"))


def _cut(text: str) -> str:
    return text if len(text) <= RESULT_CHARS else f"{text[:RESULT_CHARS]}… ({len(text) - RESULT_CHARS} more characters)"


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())
