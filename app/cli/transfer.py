"""`engram export AGENT [-o FILE]` and `engram import FILE`, over HTTP like the other client commands (the server
does the work in one transaction; the client moves the bytes, with a progress bar on stderr)."""

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from app.cli import client
from app.cli.terminal import visible

CHUNK = 64 * 1024


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    export = sub.add_parser("export", help="write an agent with all its memory to one JSON document")
    export.add_argument("agent", help="agent id or name")
    export.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    export.add_argument("--no-embeddings", action="store_true", help="leave the vectors out (the importer embeds again)")
    export.set_defaults(run=_export)
    load = sub.add_parser("import", help="import an Engram export or a Letta agent file (.af) as a new agent")
    load.add_argument("file", help="the file (- for stdin)")
    load.add_argument("--name", help="name the new agent (default: the file's)")
    load.set_defaults(run=_import)
    passages = sub.add_parser(
        "import-passages",
        help="import passages into an agent's archival memory as a background job, with a progress bar",
        description='FILE holds JSON lines ({"content": …, "tags"?: […], "occurred_at"?: …, "sources"?: [ids]} per '
        "line) or a JSON array of such objects. Ctrl-C stops watching; the job goes on (engram import-passages "
        "--cancel JOB AGENT stops it).",
    )
    passages.add_argument("file", help="the file (- for stdin); or, with --cancel, the job id")
    passages.add_argument("agent", help="agent id or name")
    passages.add_argument("--cancel", action="store_true", help="cancel the job given instead of a file")
    passages.set_defaults(run=_import_passages)
    for command in (export, load, passages):
        client.add_connection_args(command)


def _bar() -> Progress:
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    return Progress(*columns, console=Console(stderr=True), transient=False)


def _export(args: argparse.Namespace) -> None:
    params = {"embeddings": "false" if args.no_embeddings else "true"}
    target = None if args.output == "-" else Path(args.output)
    partial = target.with_name(target.name + ".part") if target else None  # the file appears only when complete
    out = partial.open("wb") if partial else sys.stdout.buffer
    try:
        with client.connect(args) as api, _bar() as bar:
            agent = api.agent(args.agent)
            task = bar.add_task(f"exporting {agent['name']}", total=None)
            with api.stream("GET", f"/v1/agents/{agent['id']}/export", params=params, timeout=None) as response:
                bar.update(task, total=int(response.headers.get("content-length") or 0) or None)
                for chunk in response.iter_bytes(CHUNK):
                    out.write(chunk)
                    bar.advance(task, len(chunk))
    except BaseException:
        if partial:
            out.close()
            partial.unlink(missing_ok=True)
        raise
    if target and partial:
        out.close()
        partial.replace(target)


def _import(args: argparse.Namespace) -> None:
    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    params = {"name": args.name} if args.name else {}

    with client.connect(args) as api, _bar() as bar:
        task = bar.add_task(f"uploading {args.file}", total=len(data))

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(data), CHUNK):
                yield data[start : start + CHUNK]
                bar.advance(task, min(CHUNK, len(data) - start))
            bar.update(task, description="importing (checking, embedding, writing)")

        headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        response = api.request(
            "POST", "/v1/agents/import", content=chunks(), headers=headers, params=params, timeout=None, ok=(413,)
        )
    if response.status_code == 413:
        raise SystemExit(
            f"engram: the file ({len(data)} bytes) is over the server's request limit (ENGRAM_MAX_REQUEST_BYTES): "
            "export it with --no-embeddings, or raise the limit on the server"
        )
    _report(response.json(), Console(highlight=False))


def _report(result: dict[str, Any], console: Console) -> None:
    agent = result["agent"]
    kind = "a Letta agent file" if result["source"] == "letta" else "an Engram export"
    console.print(Text(f"imported {visible(agent['name'])} as {agent['id']} (from {kind})", "bold"))
    console.print(
        f"  {result['blocks']} blocks ({result['revisions']} revisions), {result['passages']} passages, "
        f"{result['messages']} messages, {result['turns']} turns; {result['embedded']} embedded on import",
        markup=False,
    )
    if result["mapped_tools"]:
        console.print(
            visible("  tools: " + ", ".join(f"{k} → {v}" if k != v else k for k, v in result["mapped_tools"].items())),
            markup=False,
        )
    if result["skipped_tools"]:
        skipped = ", ".join(result["skipped_tools"])
        console.print(Text(visible(f"  skipped tools (Engram has none like them): {skipped}"), "yellow"))
    for note in result["notes"]:
        console.print(Text(visible(f"  note: {note}"), "dim"))


POLL_SECONDS = 0.5


def _import_passages(args: argparse.Namespace) -> None:
    console = Console(stderr=True, highlight=False)
    with client.connect(args) as api:
        agent = api.agent(args.agent)
        jobs = f"/v1/agents/{agent['id']}/archival/import"
        if args.cancel:
            job = api.json("POST", f"{jobs}/{args.file}/cancel")
            console.print(f"import job {job['id']}: {job['status']}, {job['done']} of {job['total']} passages stored")
            return
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
        array = data.lstrip()[:1] == b"["
        headers = {"Content-Type": "application/json" if array else "application/x-ndjson"}
        with _bar() as bar:
            task = bar.add_task(f"uploading {args.file}", total=len(data))

            def chunks() -> Iterator[bytes]:
                for start in range(0, len(data), CHUNK):
                    yield data[start : start + CHUNK]
                    bar.advance(task, min(CHUNK, len(data) - start))

            job = api.json("POST", jobs, content=chunks(), headers=headers, timeout=None)
        try:
            job = _watch(api, f"{jobs}/{job['id']}", job, console)
        except KeyboardInterrupt:
            console.print(f"stopped watching; import job {job['id']} goes on (--cancel {job['id']} stops it)")
            raise SystemExit(130) from None
    duplicates = f", {job['duplicates']} near-duplicates of stored passages kept once" if job["duplicates"] else ""
    console.print(Text(f"import job {job['id']}: {job['status']}, {job['done']} of {job['total']} passages{duplicates}", "bold"))
    if job["status"] != "done":
        if job["error"]:
            console.print(Text(visible(job["error"]), "red"))
        raise SystemExit(1)


def _watch(api: client.Api, path: str, job: dict[str, Any], console: Console) -> dict[str, Any]:
    """Poll the job until it ends, with a bar of passages stored, the rate and the time left."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("storing passages", total=job["total"], completed=job["done"])
        while job["status"] in ("queued", "running"):
            time.sleep(POLL_SECONDS)
            job = api.json("GET", path)
            bar.update(task, completed=job["done"])
    return job
