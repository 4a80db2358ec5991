"""`engram …`: the server-side commands (serve, migrate, keys, reembed, mcp, openapi) and the client commands
(chat, agents, memory, export, import), which talk to a running server over HTTP with an API key."""

import argparse
import logging

from app.cli import agents, chat, memory, server, transfer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for AI agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (server, chat, agents, memory, transfer):
        group.register(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the client commands' requests are not news
    args.run(args)
