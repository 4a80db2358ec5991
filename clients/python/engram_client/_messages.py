"""client.messages: recall memory, every message said; conversations held elsewhere handed in."""

from collections.abc import Iterable, Mapping
from typing import Any

from engram_client._binding import M, Resource, endpoint
from engram_client._core import Flow, Id, Route
from engram_client._wire import HandIn as HandInBody
from engram_client._wire import MessagesQuery
from engram_client.inputs import NewMessage, When, instant
from engram_client.models import HandIn, Message, MessageErasure, Page

ADD = Route("POST", "/v1/agents/{agent_id}/messages", HandIn, body=HandInBody)
LIST = Route("GET", "/v1/agents/{agent_id}/messages", Page[Message], query=MessagesQuery)
DELETE = Route("DELETE", "/v1/agents/{agent_id}/messages/{message_id}", MessageErasure)


def add(agent_id: Id, messages: Iterable[NewMessage | Mapping[str, Any]], *, memory_pass: bool = False) -> Flow[HandIn]:
    """Hand in a conversation held elsewhere (up to 500 messages, user's and assistant's): stored in recall memory,
    embedded and dated as given, without running the agent. A message's `id` (yours) makes a retry safe.
    `memory_pass`: the agent's model then distils facts from what was said (`turns.wait` the `memory_pass_id`)."""
    given = [NewMessage.model_validate(m) for m in messages]
    return ADD.call(agent_id=agent_id, body=HandInBody(messages=given, memory_pass=memory_pass))


def list_(
    agent_id: Id,
    *,
    query: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    after: When | None = None,
    before: When | None = None,
    include_context: bool | None = None,
) -> Flow[Page[Message]]:
    """A page of recall memory, newest first; with `query`, the messages that best answer it."""
    wanted = MessagesQuery(
        query=query, limit=limit, cursor=cursor, after=instant(after), before=instant(before), include_context=include_context
    )
    return LIST.call(agent_id=agent_id, query=wanted)


def delete(agent_id: Id, message_id: Id) -> Flow[MessageErasure]:
    """Forget a message (an assistant's with its tool results) and the passages drawn from it alone."""
    return DELETE.call(agent_id=agent_id, message_id=message_id)


class Messages(Resource[M]):
    add = endpoint(add)
    list = endpoint(list_)
    delete = endpoint(delete)
