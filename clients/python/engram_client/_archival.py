"""client.archival: passages kept for good, searched by meaning and by words; superseded, never overwritten; held
under your keys; imported in bulk as a job."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from engram_client._binding import M, Resource, endpoint
from engram_client._core import Flow, Id, Pause, Route
from engram_client._wire import ArchivalQuery, PassageBatch, PassageWrite
from engram_client.inputs import NewPassage, When, instant, uuids
from engram_client.models import ImportJob, Page, Passage, PassageBatchRead, PassageErasure

ADD = Route("POST", "/v1/agents/{agent_id}/archival", Passage, body=NewPassage)
ADD_MANY = Route("POST", "/v1/agents/{agent_id}/archival/batch", PassageBatchRead, body=PassageBatch)
LIST = Route("GET", "/v1/agents/{agent_id}/archival", Page[Passage], query=ArchivalQuery)
GET = Route("GET", "/v1/agents/{agent_id}/archival/{passage_id}", Passage)
DELETE = Route("DELETE", "/v1/agents/{agent_id}/archival/{passage_id}", PassageErasure)
SUPERSEDE = Route("POST", "/v1/agents/{agent_id}/archival/{passage_id}/supersede", Passage, body=PassageWrite)
PUT_KEY = Route("PUT", "/v1/agents/{agent_id}/archival/keys/{key}", Passage, body=PassageWrite)
GET_KEY = Route("GET", "/v1/agents/{agent_id}/archival/keys/{key}", Passage)
DELETE_KEY = Route("DELETE", "/v1/agents/{agent_id}/archival/keys/{key}", PassageErasure)
IMPORT_LINES = Route("POST", "/v1/agents/{agent_id}/archival/import", ImportJob, content_type="application/x-ndjson")
IMPORT_ARRAY = Route("POST", "/v1/agents/{agent_id}/archival/import", ImportJob, content_type="application/json")
IMPORT_JOB = Route("GET", "/v1/agents/{agent_id}/archival/import/{job_id}", ImportJob)
CANCEL_IMPORT = Route("POST", "/v1/agents/{agent_id}/archival/import/{job_id}/cancel", ImportJob)

Progress = Callable[[ImportJob], object]


def add(
    agent_id: Id,
    content: str,
    *,
    occurred_at: When | None = None,
    tags: Sequence[str] | None = None,
    sources: Sequence[Id] | None = None,
    key: str | None = None,
) -> Flow[Passage]:
    """Store a passage (a near-duplicate of a stored one is that one, with `duplicate` set); `key`: under your key
    (Conflict if a current passage holds it; `put_key` stores or supersedes)."""
    passage = NewPassage(**_fields(content, occurred_at, tags, sources), key=key)
    return ADD.call(agent_id=agent_id, body=passage)


def add_many(agent_id: Id, passages: Iterable[NewPassage | Mapping[str, Any] | str]) -> Flow[list[Passage]]:
    """Store up to 500 passages (50,000 characters) at once, embedded while you wait; more: `import_file`."""
    batch = PassageBatch(items=[_passage(p) for p in passages])
    return (yield from ADD_MANY.call(agent_id=agent_id, body=batch)).items


def search(
    agent_id: Id,
    query: str,
    *,
    k: int = 10,
    tags: Sequence[str] | None = None,
    as_of: When | None = None,
    include_superseded: bool | None = None,
    min_score: float | None = None,
    mode: Literal["hybrid", "vector", "text"] | None = None,
) -> Flow[list[Passage]]:
    """The `k` passages that best answer `query`, best first (current ones, or as they stood `as_of`)."""
    wanted = ArchivalQuery(
        query=query,
        k=k,
        tags=None if tags is None else list(tags),
        as_of=instant(as_of),
        include_superseded=include_superseded,
        min_score=min_score,
        mode=mode,
    )
    return (yield from LIST.call(agent_id=agent_id, query=wanted)).items


def list_(
    agent_id: Id,
    *,
    limit: int | None = None,
    cursor: str | None = None,
    tags: Sequence[str] | None = None,
    after: When | None = None,
    before: When | None = None,
    as_of: When | None = None,
    include_superseded: bool | None = None,
) -> Flow[Page[Passage]]:
    """A page of the passages, newest first (`after`/`before`: when they were stored)."""
    wanted = ArchivalQuery(
        limit=limit,
        cursor=cursor,
        tags=None if tags is None else list(tags),
        after=instant(after),
        before=instant(before),
        as_of=instant(as_of),
        include_superseded=include_superseded,
    )
    return LIST.call(agent_id=agent_id, query=wanted)


def get(agent_id: Id, passage_id: Id) -> Flow[Passage]:
    return GET.call(agent_id=agent_id, passage_id=passage_id)


def delete(agent_id: Id, passage_id: Id) -> Flow[PassageErasure]:
    """Erase the passage and what was drawn from it alone; what it superseded is current again."""
    return DELETE.call(agent_id=agent_id, passage_id=passage_id)


def supersede(
    agent_id: Id,
    passage_id: Id,
    content: str,
    *,
    occurred_at: When | None = None,
    tags: Sequence[str] | None = None,
    sources: Sequence[Id] | None = None,
) -> Flow[Passage]:
    """The fact as it is now, replacing the passage (kept, `valid_until` then); Conflict if superseded already."""
    successor = PassageWrite(**_fields(content, occurred_at, tags, sources))
    return SUPERSEDE.call(agent_id=agent_id, passage_id=passage_id, body=successor)


def put_key(
    agent_id: Id,
    key: str,
    content: str,
    *,
    occurred_at: When | None = None,
    tags: Sequence[str] | None = None,
    sources: Sequence[Id] | None = None,
) -> Flow[Passage]:
    """The passage under your `key`: stored, or superseding the one the key holds (kept, with the key, as its
    history); the same again adds no version (`duplicate` set). Keys: 1 to 200 letters, digits and -._~:@."""
    return PUT_KEY.call(agent_id=agent_id, key=key, body=PassageWrite(**_fields(content, occurred_at, tags, sources)))


def get_key(agent_id: Id, key: str) -> Flow[Passage]:
    """The passage your key holds now (NotFound: none)."""
    return GET_KEY.call(agent_id=agent_id, key=key)


def delete_key(agent_id: Id, key: str) -> Flow[PassageErasure]:
    """Erase the key's passage with its earlier versions and what was drawn from them alone; the key is free again."""
    return DELETE_KEY.call(agent_id=agent_id, key=key)


def import_file(
    agent_id: Id,
    path: str | PathLike[str],
    *,
    wait: bool = True,
    poll_interval: float = 1.0,
    on_progress: Progress | None = None,
) -> Flow[ImportJob]:
    """Import a file of passages, JSON lines or a JSON array of `{"content", "tags"?, "occurred_at"?, "sources"?}`
    (up to 50 MB), as a job stored in the background. `wait`: poll it until it ends, handing each state to
    `on_progress`; else the job as queued (`import_job` reads it again). A failed job is returned, not raised."""
    content = Path(path).read_bytes()
    route = IMPORT_ARRAY if content.lstrip()[:1] == b"[" else IMPORT_LINES
    return _imported(route, agent_id, content, wait, poll_interval, on_progress)


def import_passages(
    agent_id: Id,
    passages: Iterable[NewPassage | Mapping[str, Any] | str],
    *,
    wait: bool = True,
    poll_interval: float = 1.0,
    on_progress: Progress | None = None,
) -> Flow[ImportJob]:
    """Import passages held in memory as a job, as `import_file` does."""
    lines = (_passage(p).model_dump_json(exclude_none=True) for p in passages)
    content = "\n".join(lines).encode()
    return _imported(IMPORT_LINES, agent_id, content, wait, poll_interval, on_progress)


def import_job(agent_id: Id, job_id: Id) -> Flow[ImportJob]:
    return IMPORT_JOB.call(agent_id=agent_id, job_id=job_id)


def wait_import(agent_id: Id, job_id: Id, *, poll_interval: float = 1.0, on_progress: Progress | None = None) -> Flow[ImportJob]:
    """The job once it has ended (done, cancelled or failed), each state seen meanwhile handed to `on_progress`."""
    while True:
        job = yield from IMPORT_JOB.call(agent_id=agent_id, job_id=job_id)
        if on_progress is not None:
            on_progress(job)
        if job.finished:
            return job
        yield Pause(poll_interval)


def cancel_import(agent_id: Id, job_id: Id) -> Flow[ImportJob]:
    """Stop the job: what is stored stays, the rest is dropped."""
    return CANCEL_IMPORT.call(agent_id=agent_id, job_id=job_id)


def _imported(
    route: Route[ImportJob], agent_id: Id, content: bytes, wait: bool, poll_interval: float, on_progress: Progress | None
) -> Flow[ImportJob]:
    job = yield from route.call(agent_id=agent_id, content=content)
    if not wait:
        return job
    return (yield from wait_import(agent_id, job.id, poll_interval=poll_interval, on_progress=on_progress))


def _fields(content: str, occurred_at: When | None, tags: Sequence[str] | None, sources: Sequence[Id] | None) -> dict[str, Any]:
    return {
        "content": content,
        "occurred_at": instant(occurred_at),
        "tags": None if tags is None else list(tags),
        "sources": uuids(sources),
    }


def _passage(given: NewPassage | Mapping[str, Any] | str) -> NewPassage:
    return NewPassage(content=given) if isinstance(given, str) else NewPassage.model_validate(given)


class Archival(Resource[M]):
    add = endpoint(add)
    add_many = endpoint(add_many)
    search = endpoint(search)
    list = endpoint(list_)
    get = endpoint(get)
    delete = endpoint(delete)
    supersede = endpoint(supersede)
    put_key = endpoint(put_key)
    get_key = endpoint(get_key)
    delete_key = endpoint(delete_key)
    import_file = endpoint(import_file)
    import_passages = endpoint(import_passages)
    import_job = endpoint(import_job)
    wait_import = endpoint(wait_import)
    cancel_import = endpoint(cancel_import)
