"""Dated memories and superseded facts over the REST API: passages and messages carry when they happened besides when
they were stored; a passage superseded by a newer one leaves the default reads but stays readable `as_of` the
dates it held; core memory reads `as_of` a time from the blocks' revisions."""

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer

from app import db
from app.auth.models import DEFAULT_TENANT_ID
from app.settings import E5_DIM
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.chat import chat
from tests.support.database import create_database, run_sql
from tests.support.service import at, tenant_with_key


def archival(agent: dict) -> str:
    return f"/v1/agents/{agent['id']}/archival"


def contents(client: TestClient, agent: dict, **params: Any) -> list[str]:
    response = client.get(archival(agent), params=params)
    assert response.status_code == 200, response.text
    return sorted(p["content"] for p in response.json()["items"])


def add(client: TestClient, agent: dict, content: str, occurred_at: str | None = None, **extra: Any) -> dict[str, Any]:
    body = {"content": content, **extra} | ({"occurred_at": occurred_at} if occurred_at else {})
    response = client.post(archival(agent), json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_passages_are_dated_when_they_happened(client: TestClient, agent: dict) -> None:
    undated = add(client, agent, "The user has a cat named Mochi.")
    assert undated["occurred_at"] == undated["created_at"]
    assert undated["valid_until"] is None and undated["superseded_by"] is None

    marathon = add(client, agent, "The user ran the Osaka marathon.", "2024-02-25T09:00:00+09:00")
    assert at(marathon["occurred_at"]) == datetime(2024, 2, 25, 0, 0, tzinfo=UTC)
    assert at(marathon["created_at"]) > at(marathon["occurred_at"])
    naive = add(client, agent, "The user adopted Mochi.", "2021-06-01T12:00:00")  # no zone: UTC
    assert at(naive["occurred_at"]) == datetime(2021, 6, 1, 12, 0, tzinfo=UTC)
    assert at(client.get(f"{archival(agent)}/{marathon['id']}").json()["occurred_at"]) == at(marathon["occurred_at"])

    batch = client.post(
        f"{archival(agent)}/batch",
        json={"items": [{"content": "The user visited Kyoto.", "occurred_at": "2023-11-03"}, {"content": "The user likes tea."}]},
    )
    assert batch.status_code == 201, batch.text
    kyoto, tea = batch.json()["items"]
    assert at(kyoto["occurred_at"]) == datetime(2023, 11, 3, tzinfo=UTC)
    assert tea["occurred_at"] == tea["created_at"]

    # The same words dated otherwise tell of another event; undated, or on the same date, they are a duplicate.
    again = add(client, agent, "The user visited Kyoto.", "2024-04-10")
    assert again["id"] != kyoto["id"] and again["duplicate"] is False
    same = client.post(archival(agent), json={"content": "The user visited Kyoto.", "occurred_at": "2023-11-03T00:00:00Z"})
    assert (same.status_code, same.json()["id"]) == (200, kyoto["id"])
    assert client.post(archival(agent), json={"content": "the user likes tea"}).json()["id"] == tea["id"]

    # Searches show the date too.
    [hit, *_] = client.get(archival(agent), params={"query": "marathon"}).json()["items"]
    assert hit["id"] == marathon["id"] and at(hit["occurred_at"]) == at(marathon["occurred_at"])


def test_a_malformed_date_is_a_422_naming_the_field(client: TestClient, agent: dict) -> None:
    cases = [
        (archival(agent), {"content": "x", "occurred_at": "last Tuesday"}, "occurred_at"),
        (archival(agent), {"content": "x", "occurred_at": "2024-13-45"}, "occurred_at"),
        (
            f"{archival(agent)}/batch",
            {"items": [{"content": "x"}, {"content": "y", "occurred_at": "soon"}]},
            "items.1.occurred_at",
        ),
    ]
    for url, body, field in cases:
        response = client.post(url, json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "invalid_request" and field in response.json()["detail"]
    passage = add(client, agent, "The user lives in Nagoya.")
    response = client.post(f"{archival(agent)}/{passage['id']}/supersede", json={"content": "y", "occurred_at": "tomorrow"})
    assert response.status_code == 422 and "occurred_at" in response.json()["detail"]
    for params in ({"as_of": "yesterday"}, {"as_of": "2024-02-30", "query": "x"}):
        response = client.get(archival(agent), params=params)
        assert response.status_code == 422 and "as_of" in response.json()["detail"]
    response = client.get(f"/v1/agents/{agent['id']}/memory", params={"as_of": "never"})
    assert response.status_code == 422 and "as_of" in response.json()["detail"]
    both = client.get(archival(agent), params={"as_of": "2024-01-01", "include_superseded": "true"})
    assert both.status_code == 422 and "as_of" in both.json()["detail"]
    assert contents(client, agent) == ["The user lives in Nagoya."]  # nothing was stored, nothing superseded


def test_supersede_closes_the_old_fact_and_reads_see_time(client: TestClient, agent: dict) -> None:
    tokyo = add(client, agent, "The user lives in Tokyo.", "2020-04-01", tags=["home"])
    response = client.post(
        f"{archival(agent)}/{tokyo['id']}/supersede",
        json={"content": "The user moved to Osaka.", "occurred_at": "2024-10-01T00:00:00Z"},
    )
    assert response.status_code == 201, response.text
    osaka = response.json()
    assert osaka["content"] == "The user moved to Osaka." and osaka["tags"] == ["home"]  # the old one's tags
    assert at(osaka["occurred_at"]) == datetime(2024, 10, 1, tzinfo=UTC)
    assert osaka["valid_until"] is None and osaka["superseded_by"] is None and osaka["duplicate"] is False
    old = client.get(f"{archival(agent)}/{tokyo['id']}").json()
    assert (old["superseded_by"], at(old["valid_until"])) == (osaka["id"], at(osaka["occurred_at"]))
    assert old["occurred_at"] == tokyo["occurred_at"] and old["content"] == tokyo["content"]

    # Listing: current only by default; as of a time, what was valid then; everything on request.
    assert contents(client, agent) == ["The user moved to Osaka."]
    assert contents(client, agent, as_of="2022-01-01") == ["The user lives in Tokyo."]
    assert contents(client, agent, as_of="2024-10-01T00:00:00Z") == ["The user moved to Osaka."]  # from its date on
    assert contents(client, agent, as_of="2019-12-31") == []
    assert contents(client, agent, include_superseded="true") == ["The user lives in Tokyo.", "The user moved to Osaka."]
    # Searching: the same rules.
    query = "where does the user live"
    assert contents(client, agent, query=query) == ["The user moved to Osaka."]
    assert contents(client, agent, query=query, as_of="2023-06-30T12:00:00+09:00") == ["The user lives in Tokyo."]
    assert contents(client, agent, query=query, include_superseded="true") == [
        "The user lives in Tokyo.",
        "The user moved to Osaka.",
    ]
    for mode in ("vector", "text"):
        assert contents(client, agent, query="Tokyo Osaka", mode=mode) == ["The user moved to Osaka."]

    # A fact dated in the future (a planned trip) is current, and not yet valid as of now.
    add(client, agent, "The user will visit Paris.", "2099-05-01")
    assert "The user will visit Paris." in contents(client, agent)
    assert "The user will visit Paris." not in contents(client, agent, as_of=datetime.now(UTC).isoformat())

    # Superseding it again: 409 naming the successor; nothing changes.
    again = client.post(f"{archival(agent)}/{tokyo['id']}/supersede", json={"content": "The user moved to Kobe."})
    assert again.status_code == 409, again.text
    assert again.json()["error"] == "already_superseded" and osaka["id"] in again.json()["detail"]
    assert "The user moved to Kobe." not in contents(client, agent, include_superseded="true")

    # Deleting the successor makes the old fact current again.
    assert client.delete(f"{archival(agent)}/{osaka['id']}").status_code == 200
    reopened = client.get(f"{archival(agent)}/{tokyo['id']}").json()
    assert reopened["superseded_by"] is None and reopened["valid_until"] is None
    assert "The user lives in Tokyo." in contents(client, agent)


def test_supersede_by_a_current_passage_with_the_same_text_reuses_it(client: TestClient, agent: dict) -> None:
    tea = add(client, agent, "The user drinks green tea every morning.", "2022-01-01")
    coffee = add(client, agent, "The user switched to coffee.", "2024-03-01")
    response = client.post(f"{archival(agent)}/{tea['id']}/supersede", json={"content": "The user switched to coffee!"})
    assert response.status_code == 200, response.text
    assert (response.json()["id"], response.json()["duplicate"]) == (coffee["id"], True)
    old = client.get(f"{archival(agent)}/{tea['id']}").json()
    assert (old["superseded_by"], at(old["valid_until"])) == (coffee["id"], at(coffee["occurred_at"]))
    # Superseding with its own words (a correction of the date, say) stores a new passage, never the old one.
    same = client.post(
        f"{archival(agent)}/{coffee['id']}/supersede", json={"content": coffee["content"], "occurred_at": "2024-02-01"}
    )
    assert same.status_code == 201 and same.json()["id"] != coffee["id"]
    assert contents(client, agent) == ["The user switched to coffee."]


def test_unknown_and_other_agents_passages_are_not_found(client: TestClient, agent: dict) -> None:
    other = client.post("/v1/agents", json={"name": "another agent"}).json()
    theirs = add(client, other, "The other agent's user lives in Sendai.")
    for passage_id in ("00000000-0000-0000-0000-000000000000", theirs["id"]):
        response = client.post(f"{archival(agent)}/{passage_id}/supersede", json={"content": "The user lives in Fukuoka."})
        assert response.status_code == 404, response.text
        assert response.json()["error"] == "not_found"
    assert client.post(f"{archival(agent)}/not-an-id/supersede", json={"content": "x"}).status_code == 422
    assert contents(client, other) == ["The other agent's user lives in Sendai."]
    assert contents(client, agent, include_superseded="true") == []  # nothing stored on the way


def test_a_tenant_cannot_supersede_another_tenants_passage(keyed: TestClient) -> None:
    _, key_a = tenant_with_key(keyed, "time-tenant-a")
    _, key_b = tenant_with_key(keyed, "time-tenant-b")
    a = {"Authorization": f"Bearer {key_a}"}
    b = {"Authorization": f"Bearer {key_b}"}
    agent_a = keyed.post("/v1/agents", json={"name": "a"}, headers=a).json()
    agent_b = keyed.post("/v1/agents", json={"name": "b"}, headers=b).json()
    passage = keyed.post(archival(agent_a), json={"content": "Tenant A's user lives in Tokyo."}, headers=a).json()
    body = {"content": "Tenant A's user lives in Osaka."}
    for url in (f"{archival(agent_a)}/{passage['id']}/supersede", f"{archival(agent_b)}/{passage['id']}/supersede"):
        response = keyed.post(url, json=body, headers=b)
        assert response.status_code == 404, response.text
    assert keyed.get(archival(agent_b), params={"include_superseded": "true"}, headers=b).json()["items"] == []
    still = keyed.get(f"{archival(agent_a)}/{passage['id']}", headers=a).json()
    assert still["superseded_by"] is None and still["valid_until"] is None


def test_core_memory_reads_as_of_a_time(client: TestClient, agent: dict) -> None:
    memory = f"/v1/agents/{agent['id']}/memory"
    before_agent = datetime(2000, 1, 1, tzinfo=UTC).isoformat()
    assert client.get(memory, params={"as_of": before_agent}).json()["blocks"] == []
    first = client.put(f"{memory}/human", json={"value": "Lives in Tokyo."}).json()
    time.sleep(0.01)
    between = datetime.now(UTC)
    time.sleep(0.01)
    client.put(f"{memory}/human", json={"value": "Lives in Osaka."})
    client.put(f"{memory}/plans", json={"value": "Visit Paris."}, headers={"If-None-Match": "*"})

    then = {b["label"]: b for b in client.get(memory, params={"as_of": between.isoformat()}).json()["blocks"]}
    assert then["human"]["value"] == "Lives in Tokyo." and then["human"]["version"] == first["version"]
    assert at(then["human"]["updated_at"]) <= between
    assert "plans" not in then  # created later
    now = {b["label"]: b for b in client.get(memory).json()["blocks"]}
    assert now["human"]["value"] == "Lives in Osaka." and now["plans"]["value"] == "Visit Paris."
    assert {
        b["label"]: b["value"] for b in client.get(memory, params={"as_of": datetime.now(UTC).isoformat()}).json()["blocks"]
    } == {label: b["value"] for label, b in now.items()}


def test_messages_are_dated(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(tools(call("send_message", text="Noted: you bake bread on Sundays.")))
    chat(client, agent, "I bake bread every Sunday.")
    messages = client.get(f"/v1/agents/{agent['id']}/messages").json()["items"]
    assert messages and all(m["occurred_at"] == m["created_at"] for m in messages)
    hits = client.get(f"/v1/agents/{agent['id']}/messages", params={"query": "bread", "include_context": "true"}).json()
    assert hits["items"] and all("occurred_at" in m for m in hits["items"])


def test_the_migration_dates_stored_rows_when_they_were_stored(postgres_server: PostgresServer) -> None:
    url = create_database(postgres_server, f"engram_dating_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM, revision="0006_quotas")
    agent_id = uuid.uuid4()
    stored = datetime(2025, 3, 14, 15, 9, 26, tzinfo=UTC)
    run_sql(
        url,
        "INSERT INTO agents (id, tenant_id, name) VALUES (:id, :tenant, 'from 0006')",
        {"id": agent_id, "tenant": DEFAULT_TENANT_ID},
    )
    run_sql(
        url,
        "INSERT INTO archival_passages (id, agent_id, content, embedding, embedding_model, search_text, created_at) "
        "VALUES (:id, :agent, 'The user lives in Tokyo.', CAST(:v AS vector), 'm', 'user lives tokyo', :at)",
        {"id": uuid.uuid4(), "agent": agent_id, "v": str([0.1] * E5_DIM), "at": stored},
    )
    run_sql(
        url,
        "INSERT INTO messages (id, agent_id, role, content, created_at) VALUES (:id, :agent, 'user', 'hello', :at)",
        {"id": uuid.uuid4(), "agent": agent_id, "at": stored},
    )
    db.run_migrations(url, E5_DIM)
    assert run_sql(url, "SELECT occurred_at, valid_until, superseded_by FROM archival_passages") == [(stored, None, None)]
    assert run_sql(url, "SELECT occurred_at FROM messages") == [(stored,)]
    indexes = {name for (name,) in run_sql(url, "SELECT indexname FROM pg_indexes WHERE tablename = 'archival_passages'")}
    assert {"ix_archival_passages_agent_occurred", "ix_archival_passages_superseded_by"} <= indexes
