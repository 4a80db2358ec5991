"""EngramStore: LangGraph's BaseStore over Engram's archival memory, each item a passage under its key (_codec.py).
Every operation is a flow (engram_client/_core.py), run by `Engram` for `batch` and by `AsyncEngram` for `abatch`."""

import functools
import uuid
from collections.abc import Callable, Iterable

from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp

from engram_client import _agents, _archival
from engram_client._core import Flow
from engram_client.client import AsyncEngram, Engram
from engram_client.errors import NotFound
from engram_client.langgraph._codec import content, engram_key, matches, namespace_matches, path_and_key, tags, value
from engram_client.models import Passage

PAGE = 200  # passages listed at once (the API's most)
SEARCHED = 100  # passages a search reads (the API's most), before the namespace and the filter narrow them
Agents = list[tuple[str, uuid.UUID]]  # agents in a read's scope, each with the label its namespaces start with


class EngramStore(BaseStore):
    """A LangGraph store whose items are Engram's archival memory. A namespace's first label names the agent (its id,
    or its name: found, or created by the first put), the labels after it tag the passage; the passage's key is those
    labels and the item's key joined by `:` (`("Aiko", "prefs"), "drink"` is `prefs:drink`), characters a key cannot
    hold written `~XX`. A value is stored as its passage's text: its `"text"` alone when that is all it holds, else
    the value as JSON, and read back as the same dict. A put of an item held already supersedes its passage (the
    earlier value kept, as Engram keeps superseded facts); a delete erases the key's passages. Search by `query` is
    Engram's archival search (by meaning and by words, the 100 best of each agent in scope), then narrowed by
    namespace and `filter`; without one, items are listed newest first. Items' `created_at` and `updated_at` are
    when the value they hold was stored. `client` and `aclient`: an Engram and an AsyncEngram of your own, for
    `batch` and `abatch`; one not given is made for the other's service and key (neither: ENGRAM_URL and
    ENGRAM_API_KEY)."""

    def __init__(self, *, client: Engram | None = None, aclient: AsyncEngram | None = None) -> None:
        self._client, self._aclient = client, aclient
        self._agent_ids: dict[str, uuid.UUID] = {}  # agent names looked up or created, and the ids they name

    @property
    def client(self) -> Engram:
        self._client = self._client or Engram(*_service(self._aclient))
        return self._client

    @property
    def aclient(self) -> AsyncEngram:
        self._aclient = self._aclient or AsyncEngram(*_service(self._client))
        return self._aclient

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self.client._runner.run(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.aclient._runner.run(self._batch(list(ops)))

    def _batch(self, ops: list[Op]) -> Flow[list[Result]]:
        """Each operation in turn, in the order given (a get after a put reads what it put)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self._get(op)))
            elif isinstance(op, PutOp):
                yield from self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._namespaces(op)))
            else:
                raise TypeError(f"not an operation of a LangGraph store: {op!r}")
        return results

    def agent_id(self, label: str, *, create: bool = False) -> Flow[uuid.UUID | None]:
        """The id of the agent a namespace's first label names: an id as it is, a name looked up (None: no agent
        has it) or, with `create`, found or created."""
        if label in self._agent_ids:
            return self._agent_ids[label]
        try:
            return uuid.UUID(label)
        except ValueError:
            pass
        agent = (yield from _agents.get_or_create(label)) if create else (yield from _agents.find(label))
        if agent is None:
            return None
        self._agent_ids[label] = agent.id
        return agent.id

    def _get(self, op: GetOp) -> Flow[Item | None]:
        agent_id = yield from self.agent_id(op.namespace[0])
        if agent_id is None:
            return None
        try:
            passage = yield from _archival.get_key(agent_id, engram_key(op.namespace[1:], op.key))
        except NotFound:
            return None
        when = passage.created_at
        return Item(value=value(passage.content), key=op.key, namespace=op.namespace, created_at=when, updated_at=when)

    def _put(self, op: PutOp) -> Flow[None]:
        label, path = op.namespace[0], op.namespace[1:]
        agent_id = yield from self.agent_id(label, create=op.value is not None)
        if op.value is None:
            if agent_id is not None:
                try:
                    yield from _archival.delete_key(agent_id, engram_key(path, op.key))
                except NotFound:
                    pass  # nothing held: deleted already
            return None
        assert agent_id is not None  # created if need be
        yield from _archival.put_key(agent_id, engram_key(path, op.key), content(op.value), tags=tags(path))
        return None

    def _search(self, op: SearchOp) -> Flow[list[SearchItem]]:
        prefix, wanted = op.namespace_prefix, op.offset + op.limit
        found: list[SearchItem] = []
        for label, agent_id in (yield from self._scope(prefix[0] if prefix else None)):

            def kept(passage: Passage, label: str = label) -> SearchItem | None:
                item = _keyed_item(label, passage)
                if item is None or item.namespace[: len(prefix)] != prefix:
                    return None
                return item if not op.filter or matches(item.value, op.filter) else None

            if op.query:
                hits = yield from _archival.search(agent_id, op.query, k=SEARCHED, tags=tags(prefix[1:]) or None)
                found += [item for hit in hits if (item := kept(hit)) is not None]
            else:
                found += yield from _listed(agent_id, tags(prefix[1:]), kept, wanted)
        if op.query:
            found.sort(key=lambda item: item.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda item: item.updated_at, reverse=True)
        return found[op.offset : wanted]

    def _namespaces(self, op: ListNamespacesOp) -> Flow[list[tuple[str, ...]]]:
        conditions = op.match_conditions or ()
        named = [c.path[0] for c in conditions if c.match_type == "prefix" and c.path and c.path[0] != "*"]
        namespaces: set[tuple[str, ...]] = set()
        for label, agent_id in (yield from self._scope(named[0] if named else None)):
            items = yield from _listed(agent_id, [], functools.partial(_keyed_item, label))
            namespaces |= {item.namespace for item in items}
        listed = {
            namespace[: op.max_depth] if op.max_depth is not None else namespace
            for namespace in namespaces
            if all(namespace_matches(namespace, condition) for condition in conditions)
        }
        return sorted(listed)[op.offset : op.offset + op.limit]

    def _scope(self, label: str | None) -> Flow[Agents]:
        """The agent `label` names (none: not found), or every agent (no label), each with its label: its name, or
        its id where the name holds a `.`, which a label cannot."""
        if label is not None:
            agent_id = yield from self.agent_id(label)
            return [] if agent_id is None else [(label, agent_id)]
        scope: Agents = []
        cursor = None
        while True:
            page = yield from _agents.list_(limit=PAGE, cursor=cursor)
            scope += [(str(a.id) if "." in a.name else a.name, a.id) for a in page.items]
            if page.next_cursor is None:
                return scope
            cursor = page.next_cursor


def _service(client: Engram | AsyncEngram | None) -> tuple[str | None, str | None]:
    """The URL and API key `client` calls with ("": none), or (None, None): the environment's."""
    if client is None:
        return None, None
    return client.base_url, client._runner.headers.get("Authorization", "").removeprefix("Bearer ")


def _listed(
    agent_id: uuid.UUID, narrowed: list[str], kept: Callable[[Passage], SearchItem | None], wanted: int | None = None
) -> Flow[list[SearchItem]]:
    """The items of the agent's current passages tagged `narrowed` that `kept` makes, newest first: all of them, or
    the first `wanted`."""
    items: list[SearchItem] = []
    cursor = None
    while wanted is None or len(items) < wanted:
        page = yield from _archival.list_(agent_id, limit=PAGE, cursor=cursor, tags=narrowed or None)
        items += [item for passage in page.items if (item := kept(passage)) is not None]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return items


def _keyed_item(label: str, passage: Passage) -> SearchItem | None:
    """The item a passage is, under the agent's `label`: None for a passage without a key this store would write."""
    parsed = path_and_key(passage.key) if passage.key is not None else None
    if parsed is None:
        return None
    path, key = parsed
    when = passage.created_at
    return SearchItem((label, *path), key, value(passage.content), when, when, passage.score)
