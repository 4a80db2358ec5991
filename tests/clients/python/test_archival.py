"""client.archival against a served Engram: passages stored (dated, tagged, with sources), in batches and as import
jobs (their progress polled), searched, listed, read, superseded and deleted; the errors each answers with."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from engram_client import Agent, Conflict, Engram, ImportJob, InvalidRequest, NewPassage, NotFound, PayloadTooLarge


def test_a_passage_is_stored_dated_tagged_with_its_sources_read_and_found(engram: Engram, agent: Agent) -> None:
    [said] = engram.messages.add(agent.id, [{"role": "user", "content": "This is Max, my new puppy!"}]).message_ids
    passage = engram.archival.add(
        agent.id, "The user has a puppy called Max.", occurred_at="2024-05-01", tags=["pets"], sources=[said]
    )
    assert (passage.content, passage.tags, passage.sources) == ("The user has a puppy called Max.", ["pets"], [said])
    assert passage.occurred_at == datetime(2024, 5, 1, tzinfo=UTC) and passage.valid_until is None
    stored = passage.model_copy(update={"duplicate": None})  # as read back: `duplicate` is an insert's
    assert engram.archival.get(agent.id, passage.id) == stored
    again = engram.archival.add(agent.id, "The user has a puppy called Max.", occurred_at="2024-05-01", tags=["pets"])
    assert again.id == passage.id and again.duplicate is True

    engram.archival.add(agent.id, "The user's sister Yuki is a nurse in Sapporo.")
    [best] = engram.archival.search(agent.id, "What is the puppy called?", k=1)
    assert best.id == passage.id and best.score is not None and best.score > 0
    assert [p.content for p in engram.archival.search(agent.id, "puppy", tags=["pets"])] == [passage.content]
    listed = engram.archival.list(agent.id, limit=1)
    assert len(listed.items) == 1 and listed.next_cursor is not None  # newest first: Yuki
    assert engram.archival.list(agent.id, cursor=listed.next_cursor).items == [stored]


def test_a_batch_is_stored_at_once_and_one_too_large_is_payload_too_large(engram: Engram, agent: Agent) -> None:
    stored = engram.archival.add_many(
        agent.id, ["Aiko likes matcha ice cream.", NewPassage(content="Aiko runs on Sundays.", tags=["sport"])]
    )
    assert [(p.content, p.tags) for p in stored] == [("Aiko likes matcha ice cream.", []), ("Aiko runs on Sundays.", ["sport"])]
    with pytest.raises(PayloadTooLarge) as too_large:
        engram.archival.add_many(agent.id, [{"content": "x" * 20_000}] * 3)
    assert too_large.value.status == 413 and "import" in too_large.value.message
    with pytest.raises(InvalidRequest) as empty:
        engram.archival.add(agent.id, "")
    assert empty.value.status == 422 and "content" in empty.value.message


def test_a_fact_superseded_stays_in_the_history_and_once_only(engram: Engram, agent: Agent) -> None:
    tokyo = engram.archival.add(agent.id, "Aiko lives in Tokyo.", occurred_at="2023-04-01")
    osaka = engram.archival.supersede(agent.id, tokyo.id, "Aiko moved to Osaka.", occurred_at=datetime(2024, 10, 1))
    assert osaka.content == "Aiko moved to Osaka."
    old = engram.archival.get(agent.id, tokyo.id)
    assert (old.superseded_by, old.valid_until) == (osaka.id, datetime(2024, 10, 1, tzinfo=UTC))
    assert [p.content for p in engram.archival.search(agent.id, "Where does Aiko live?")] == ["Aiko moved to Osaka."]
    history = engram.archival.search(agent.id, "Where does Aiko live?", include_superseded=True)
    assert {p.content for p in history} == {"Aiko lives in Tokyo.", "Aiko moved to Osaka."}
    assert [p.content for p in engram.archival.search(agent.id, "Where does Aiko live?", as_of="2024-06-01")] == [
        "Aiko lives in Tokyo."
    ]
    with pytest.raises(Conflict) as twice:
        engram.archival.supersede(agent.id, tokyo.id, "Aiko moved to Kyoto.")
    assert str(osaka.id) in twice.value.message  # it names the successor


def test_deleting_a_passage_says_what_went_with_it(engram: Engram, agent: Agent) -> None:
    fact = engram.archival.add(agent.id, "Aiko plays the violin.")
    drawn = engram.archival.add(agent.id, "Aiko is musical.", sources=[fact.id])
    erased = engram.archival.delete(agent.id, fact.id)
    assert (erased.id, erased.erased_passages, erased.sources_trimmed) == (fact.id, [drawn.id], 0)
    with pytest.raises(NotFound):
        engram.archival.get(agent.id, drawn.id)
    with pytest.raises(NotFound):
        engram.archival.delete(agent.id, fact.id)


def test_a_file_is_imported_as_a_job_its_progress_polled(engram: Engram, agent: Agent, tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text("\n".join(json.dumps({"content": f"Note {i}: Aiko visited shrine number {i}."}) for i in range(40)))
    seen: list[ImportJob] = []
    job = engram.archival.import_file(agent.id, notes, poll_interval=0.05, on_progress=seen.append)
    assert (job.status, job.total, job.done, job.error) == ("done", 40, 40, None)
    assert seen[-1] == job and [s.done for s in seen] == sorted(s.done for s in seen)
    assert len(engram.archival.list(agent.id, limit=200).items) == 40

    array = tmp_path / "more.json"
    array.write_text(json.dumps([{"content": "Aiko's favourite shrine is Fushimi Inari.", "tags": ["kyoto"]}]))
    queued = engram.archival.import_file(agent.id, array, wait=False)
    assert queued.status in ("queued", "running", "done") and queued.total == 1
    assert engram.archival.wait_import(agent.id, queued.id, poll_interval=0.05).status == "done"
    assert engram.archival.import_job(agent.id, queued.id).done == 1
    assert [p.tags for p in engram.archival.search(agent.id, "favourite shrine", k=1)] == [["kyoto"]]


def test_an_import_held_in_memory_is_a_job_that_can_be_cancelled(engram: Engram, agent: Agent) -> None:
    many = (f"Passage {i} about the weather in Sapporo on day {i}." for i in range(600))
    queued = engram.archival.import_passages(agent.id, many, wait=False)
    cancelled = engram.archival.cancel_import(agent.id, queued.id)
    assert cancelled.status == "cancelled" and cancelled.done < cancelled.total == 600
    assert engram.archival.import_job(agent.id, queued.id).status == "cancelled"
    with pytest.raises(InvalidRequest) as bad:
        engram.archival.import_passages(agent.id, [{"content": "ok"}, {"content": "x" * 20_001}])
    assert "line 2" in bad.value.message and "content" in bad.value.message


def test_a_passage_under_a_key_is_stored_superseded_read_and_deleted_with_its_history(engram: Engram, agent: Agent) -> None:
    first = engram.archival.put_key(agent.id, "profile:home", "Aiko lives in Tokyo.", occurred_at="2023-04-01", tags=["home"])
    assert (first.key, first.content, first.tags) == ("profile:home", "Aiko lives in Tokyo.", ["home"])
    second = engram.archival.put_key(agent.id, "profile:home", "Aiko lives in Osaka.", occurred_at="2024-10-01")
    assert second.id != first.id and engram.archival.get_key(agent.id, "profile:home") == second.model_copy(
        update={"duplicate": None}
    )
    old = engram.archival.get(agent.id, first.id)
    assert (old.key, old.superseded_by) == ("profile:home", second.id)  # the key's history
    unchanged = engram.archival.put_key(agent.id, "profile:home", "Aiko lives in Osaka.", occurred_at="2024-10-01")
    assert unchanged.id == second.id and unchanged.duplicate is True

    with pytest.raises(Conflict) as taken:
        engram.archival.add(agent.id, "Aiko lives in Kyoto.", key="profile:home")
    assert taken.value.code == "key_taken"
    keyed = engram.archival.add(agent.id, "Aiko's cat is Mochi.", key="pets.cat")
    assert engram.archival.get_key(agent.id, "pets.cat").id == keyed.id

    erased = engram.archival.delete_key(agent.id, "profile:home")
    assert erased.id == second.id and set(erased.erased_passages) >= {first.id}
    with pytest.raises(NotFound):
        engram.archival.get_key(agent.id, "profile:home")
    with pytest.raises(InvalidRequest):
        engram.archival.put_key(agent.id, ".hidden", "A key may not start with a dot.")
