"""client.memory (core memory) against a served Engram: read, written with If-Match and If-None-Match, its history;
a stale version and an unknown label as the errors they are."""

from datetime import timedelta

import pytest
from engram_client import Agent, Engram, NotFound, PreconditionFailed


def test_a_block_is_read_written_with_its_version_and_its_history_kept(engram: Engram, agent: Agent) -> None:
    human = engram.memory.get(agent.id)["human"]
    written = engram.memory.put(agent.id, "human", "名前: 太郎", if_match=human.version)
    assert (written.value, written.version) == ("名前: 太郎", human.version + 1)
    assert engram.memory.get(agent.id)["human"] == written
    assert [(r.version, r.value, r.source) for r in engram.memory.history(agent.id, "human").items][0] == (
        written.version,
        "名前: 太郎",
        "api",
    )
    # As of just before the write, the block as it was.
    assert engram.memory.get(agent.id, as_of=written.updated_at - timedelta(milliseconds=1))["human"].value == human.value

    with pytest.raises(PreconditionFailed) as stale:
        engram.memory.put(agent.id, "human", "名前: 花子", if_match=human.version)
    assert stale.value.status == 412
    assert engram.memory.get(agent.id)["human"].value == "名前: 太郎"  # nothing written


def test_a_block_is_created_once_and_an_unknown_label_is_not_found(engram: Engram, agent: Agent) -> None:
    with pytest.raises(NotFound) as unknown:
        engram.memory.put(agent.id, "plans", "Kyoto in May")
    assert "human" in unknown.value.message  # it lists the labels there are
    created = engram.memory.put(agent.id, "plans", "Kyoto in May", create=True, limit=500, description="trips")
    assert (created.label, created.limit, created.description, created.version) == ("plans", 500, "trips", 1)
    with pytest.raises(PreconditionFailed):
        engram.memory.put(agent.id, "plans", "Osaka", create=True)
    with pytest.raises(KeyError, match="plans"):
        engram.memory.get(agent.id)["nothing"]
