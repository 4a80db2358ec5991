"""`engram …`: the server-side commands (serve, migrate, keys, backup, restore, reembed, mcp, openapi) and the client
commands (chat, agents, memory, export, import, import-passages), which talk to a running server over HTTP with an API key.

Every failure a user can cause (a missing file, a bad id, an unreachable server or database, invalid settings)
ends the command with one line on stderr and exit status 1; a traceback means a bug."""

import argparse
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from app import __version__
from app.cli import agents, backup, chat, memory, server, transfer
from app.cli.terminal import visible


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for AI agents.")
    parser.add_argument("--version", action="version", version=f"engram {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (server, backup, chat, agents, memory, transfer):
        group.register(sub)
    args = parser.parse_args(argv)
    # One-shot commands say what they did on stdout; their stderr is for problems (long-running ones ask for INFO).
    logging.basicConfig(level=getattr(args, "logs", logging.WARNING), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the client commands' requests are not news
    logging.getLogger("pgserver").setLevel(logging.WARNING)  # each pg_ctl command line it runs, at INFO
    # platformdirs' notice that it falls back to /tmp for pgserver's lock file: not the user's business.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    with one_line_errors():
        args.run(args)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """The errors a command can meet in normal use, as `engram: <why>` and exit status 1."""
    import httpx
    import pydantic
    from sqlalchemy.exc import DBAPIError

    from app.errors import EngramError, format_validation

    try:
        yield
    except SystemExit as exc:  # a command's own `engram: <why>`, which may quote stored text
        if isinstance(exc.code, str):
            raise SystemExit(visible(exc.code)) from None
        raise
    except EngramError as exc:  # e.g. NotFound from a repository, DatabaseUnreachable
        raise SystemExit(f"engram: {exc.detail}") from None
    except (ConnectionError, TimeoutError) as exc:  # httpx wraps its own: these come from the database driver
        raise SystemExit(f"engram: cannot reach the database ({exc}); is DATABASE_URL right, is it running?") from None
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise SystemExit(f"engram: {exc.strerror or exc}{where}") from None
    except pydantic.ValidationError as exc:  # settings from the environment
        # Each problem named by the environment variable the user set.
        named = [{**e, "loc": (f"ENGRAM_{'.'.join(map(str, e['loc'])).upper()}",)} for e in exc.errors()]
        raise SystemExit(f"engram: invalid settings: {format_validation(named)}") from None
    except DBAPIError as exc:  # the database refused (a wrong password, no such database, …)
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise SystemExit(f"engram: the database refused: {reason}") from None
    except httpx.HTTPError as exc:
        raise SystemExit(f"engram: {exc}") from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
