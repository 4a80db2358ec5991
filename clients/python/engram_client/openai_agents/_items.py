"""How a session's items live in recall memory: a message the SDK gives as text is stored as that message, readable
by everything that reads memory (recollection, search, memory passes); any other item (a tool call and its output,
reasoning, a system message, an image…) is stored as its JSON behind a marker, in as many messages as it needs, and
read back exactly as given."""

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from engram_client._frameworks import Role
from engram_client.inputs import NewMessage
from engram_client.models import Message

MARKER = "[agents-sdk item]"
LAST, MORE = f"{MARKER} ", f"{MARKER}+"  # an item's last (or only) part; a part continued in the next message
MESSAGE_CHARS = 32_000  # what one message holds
PART_CHARS = MESSAGE_CHARS - len(LAST)
ROLES: tuple[Role, ...] = ("user", "assistant")
ENVELOPE = ("type", "id", "status", "provider_data")  # what a model's reply carries beside its text: not kept

Item = Mapping[str, Any]


def said(item: Item) -> tuple[Role, str] | None:
    """The role and text of a user's or assistant's message of plain text: `{"role", "content": str}` (as the SDK
    makes of a string input), or one text part (`input_text`, or `output_text` without annotations: a model's
    reply, whose id, status and provider data are let go). None for anything else, which is kept as given."""
    role, content = item.get("role"), item.get("content")
    if role not in ROLES or item.get("type", "message") != "message":
        return None
    if isinstance(content, list) and len(content) == 1 and isinstance(part := content[0], Mapping):
        plain_part = part.get("type") in ("input_text", "output_text") and not part.get("annotations")
        if not plain_part or set(part) - {"type", "text", "annotations", "logprobs"}:
            return None
        content = part.get("text")
    if set(item) - {"role", "content", *ENVELOPE} or not isinstance(content, str):
        return None
    if not content.strip() or len(content) > MESSAGE_CHARS or content.startswith(MARKER):
        return None  # not storable as it is, or would read as an item
    return role, content


def stored(items: Iterable[Item]) -> Iterator[NewMessage]:
    """The messages that hold `items`, in order; each has an id of its own, so that a hand-in retried stores once."""
    for item in items:
        if (message := said(item)) is not None:
            role, text = message
            yield NewMessage(role=role, content=text, id=f"agents-sdk:{uuid.uuid4()}")
            continue
        whole = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        parts = [whole[start : start + PART_CHARS] for start in range(0, len(whole), PART_CHARS)]
        for number, part in enumerate(parts, 1):
            flag = LAST if number == len(parts) else MORE
            yield NewMessage(role="assistant", content=flag + part, id=f"agents-sdk:{uuid.uuid4()}")


class Reader:
    """Items from messages read newest first (as recall memory lists them): `read` each message, `done` at the end;
    `items` holds each item read with the ids of the messages that hold it, newest first. A message of the agent's
    own turns that is neither (a tool's result, a call without text) is passed over."""

    def __init__(self) -> None:
        self.items: list[tuple[Item, list[uuid.UUID]]] = []
        self._parts: list[Message] = []  # the item being read: its last part first

    def read(self, message: Message) -> None:
        if self._parts and message.role == "assistant" and message.content.startswith(MORE):
            self._parts.append(message)
            return
        self.done()
        if message.role == "assistant" and message.content.startswith(LAST):
            self._parts = [message]
        elif message.role in ROLES and message.content.strip() and not message.content.startswith(MARKER):
            self.items.append(({"role": message.role, "content": message.content}, [message.id]))
        # else: a part whose item lost its last part (erased elsewhere), or not a message said in a conversation

    def done(self) -> None:
        if not self._parts:
            return
        parts, self._parts = self._parts[::-1], []
        try:
            item = json.loads("".join(part.content[len(LAST) :] for part in parts))
        except json.JSONDecodeError:
            return  # a part of it was erased elsewhere: what is left cannot be given back as it was
        self.items.append((item, [part.id for part in reversed(parts)]))
