"""client.memory: core memory, the labelled blocks in every prompt; each write a revision."""

from engram_client._binding import M, Resource, endpoint
from engram_client._core import Flow, Id, Route
from engram_client._wire import AsOf, BlockWrite
from engram_client.inputs import When, instant
from engram_client.models import Block, CoreMemory, Page, Revision

GET = Route("GET", "/v1/agents/{agent_id}/memory", CoreMemory, query=AsOf)
PUT = Route("PUT", "/v1/agents/{agent_id}/memory/{label}", Block, body=BlockWrite, headers=("If-Match", "If-None-Match"))
HISTORY = Route("GET", "/v1/agents/{agent_id}/memory/{label}/history", Page[Revision])


def get(agent_id: Id, *, as_of: When | None = None) -> Flow[CoreMemory]:
    """The agent's blocks (`as_of`: each at its revision of then); `memory["human"]` is one by its label."""
    return GET.call(agent_id=agent_id, query=AsOf(as_of=instant(as_of)))


def put(
    agent_id: Id,
    label: str,
    value: str,
    *,
    if_match: int | None = None,
    create: bool = False,
    limit: int | None = None,
    description: str | None = None,
    read_only: bool | None = None,
) -> Flow[Block]:
    """Replace a block's value. `if_match`: the version read (PreconditionFailed if it changed since); `create`:
    a new block (PreconditionFailed if the label has one). An unknown label without `create` is NotFound."""
    return PUT.call(
        agent_id=agent_id,
        label=label,
        body=BlockWrite(value=value, limit=limit, description=description, read_only=read_only),
        headers={"If-Match": None if if_match is None else str(if_match), "If-None-Match": "*" if create else None},
    )


def history(agent_id: Id, label: str) -> Flow[Page[Revision]]:
    """Every revision of the block, with who made it (`agent` in a turn, or `api`)."""
    return HISTORY.call(agent_id=agent_id, label=label)


class Memory(Resource[M]):
    get = endpoint(get)
    put = endpoint(put)
    history = endpoint(history)
