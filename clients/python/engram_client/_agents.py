"""client.agents: agents, found by id or by name (unique per tenant), and whole agents exported and imported."""

from collections.abc import Mapping, Sequence
from typing import Any

from engram_client._binding import M, Resource, endpoint
from engram_client._core import Flow, Id, Route
from engram_client._wire import AgentCreate, AgentsQuery, AgentUpdate, ExportQuery, ImportQuery
from engram_client.errors import Conflict
from engram_client.inputs import NewBlock
from engram_client.models import Agent, ImportResult, Page

CREATE = Route("POST", "/v1/agents", Agent, body=AgentCreate)
LIST = Route("GET", "/v1/agents", Page[Agent], query=AgentsQuery)
GET = Route("GET", "/v1/agents/{agent_id}", Agent)
UPDATE = Route("PATCH", "/v1/agents/{agent_id}", Agent, body=AgentUpdate)
DELETE = Route("DELETE", "/v1/agents/{agent_id}", type(None))
EXPORT = Route("GET", "/v1/agents/{agent_id}/export", dict[str, Any], query=ExportQuery)
IMPORT = Route("POST", "/v1/agents/import", ImportResult, body=dict[str, Any], query=ImportQuery)


def create(
    name: str,
    *,
    system: str | None = None,
    blocks: Sequence[NewBlock | Mapping[str, Any]] | None = None,
    model: str | None = None,
) -> Flow[Agent]:
    """A new agent (409 Conflict when the name is taken); blocks default to `persona` and `human`."""
    given = None if blocks is None else [NewBlock.model_validate(b) for b in blocks]
    return CREATE.call(body=AgentCreate(name=name, system=system, blocks=given, model=model))


def get(agent_id: Id) -> Flow[Agent]:
    return GET.call(agent_id=agent_id)


def list_(*, limit: int | None = None, cursor: str | None = None) -> Flow[Page[Agent]]:
    """A page of the agents, oldest first."""
    return LIST.call(query=AgentsQuery(limit=limit, cursor=cursor))


def find(name: str) -> Flow[Agent | None]:
    """The agent named `name`, or None."""
    page = yield from LIST.call(query=AgentsQuery(name=name))
    return page.items[0] if page.items else None


def get_or_create(
    name: str, *, system: str | None = None, blocks: Sequence[NewBlock | Mapping[str, Any]] | None = None
) -> Flow[Agent]:
    """The agent named `name`, created on the first call (one created meanwhile by another process is found)."""
    if (found := (yield from find(name))) is not None:
        return found
    try:
        return (yield from create(name, system=system, blocks=blocks))
    except Conflict:
        if (found := (yield from find(name))) is None:  # not a name created since we looked
            raise
        return found


def update(agent_id: Id, *, name: str | None = None, system: str | None = None, model: str | None = None) -> Flow[Agent]:
    return UPDATE.call(agent_id=agent_id, body=AgentUpdate(name=name, system=system, model=model))


def delete(agent_id: Id) -> Flow[None]:
    """Delete the agent and all its memory."""
    return DELETE.call(agent_id=agent_id)


def export(agent_id: Id, *, embeddings: bool = True) -> Flow[dict[str, Any]]:
    """The agent as one versioned JSON document (blocks with their history, passages, messages, turns)."""
    return EXPORT.call(agent_id=agent_id, query=ExportQuery(embeddings=embeddings))


def import_document(document: Mapping[str, Any], *, name: str | None = None) -> Flow[ImportResult]:
    """A new agent from an export (or a Letta agent file), named `name` or as the document names it."""
    return IMPORT.call(body=dict(document), query=ImportQuery(name=name))


class Agents(Resource[M]):
    create = endpoint(create)
    get = endpoint(get)
    list = endpoint(list_)
    find = endpoint(find)
    get_or_create = endpoint(get_or_create)
    update = endpoint(update)
    delete = endpoint(delete)
    export = endpoint(export)
    import_document = endpoint(import_document)
