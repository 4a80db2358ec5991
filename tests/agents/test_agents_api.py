import uuid

from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer

from app import db
from app.auth.models import DEFAULT_TENANT_ID
from app.settings import E5_DIM
from tests.support.database import create_database, run_sql
from tests.support.service import tenant_with_key


def test_create_agent_with_default_blocks(client: TestClient) -> None:
    response = client.post("/v1/agents", json={"name": "Hana"})
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Hana"
    assert {b["label"] for b in body["blocks"]} == {"persona", "human"}
    assert all(b["version"] == 1 and b["limit"] == 2000 for b in body["blocks"])


def test_create_agent_with_custom_blocks(client: TestClient) -> None:
    blocks = [{"label": "human", "value": "名前: 花子", "limit": 100}, {"label": "rules", "value": "be kind", "read_only": True}]
    body = client.post(
        "/v1/agents", json={"name": f"custom {uuid.uuid4().hex[:6]}", "blocks": blocks, "model": "gemini-2.5-flash"}
    ).json()
    by_label = {b["label"]: b for b in body["blocks"]}
    assert by_label["human"] == {**by_label["human"], "value": "名前: 花子", "limit": 100}
    assert by_label["rules"]["read_only"] is True
    assert body["model"] == "gemini-2.5-flash"


def test_read_update_delete_agent(client: TestClient, agent: dict) -> None:
    path = f"/v1/agents/{agent['id']}"
    assert client.get(path).json()["id"] == agent["id"]
    patched = client.patch(path, json={"name": "Renamed", "system": "Be brief."}).json()
    assert (patched["name"], patched["system"]) == ("Renamed", "Be brief.")
    client.post(f"{path}/archival", json={"content": "something"})
    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404
    assert client.get(f"{path}/archival").status_code == 404


def test_list_agents_paginates(client: TestClient) -> None:
    created = {client.post("/v1/agents", json={"name": f"p{i}"}).json()["id"] for i in range(3)}
    seen: set[str] = set()
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/agents", params=params).json()
        assert len(page["items"]) <= 2
        seen |= {a["id"] for a in page["items"]}
        assert all({b["label"] for b in a["blocks"]} == {"persona", "human"} for a in page["items"] if a["id"] in created)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert created <= seen


def test_bad_ids_and_bodies(client: TestClient, agent: dict) -> None:
    unknown = uuid.uuid4()
    cases = [
        ("GET", "/v1/agents/not-a-uuid", None, 422),
        ("GET", f"/v1/agents/{unknown}", None, 404),
        ("PATCH", f"/v1/agents/{unknown}", {"name": "x"}, 404),
        ("DELETE", f"/v1/agents/{unknown}", None, 404),
        ("POST", "/v1/agents", {}, 422),
        ("POST", "/v1/agents", {"name": ""}, 422),
        ("POST", "/v1/agents", {"name": "x", "blocks": [{"label": "Bad Label"}]}, 422),
        ("POST", "/v1/agents", {"name": "x", "blocks": [{"label": "a"}, {"label": "a"}]}, 422),
        ("POST", "/v1/agents", {"name": "x", "blocks": [{"label": "a", "value": "toolong", "limit": 3}]}, 422),
        ("PATCH", f"/v1/agents/{agent['id']}", {"name": None}, 422),
        ("GET", "/v1/agents?cursor=garbage", None, 422),
        ("GET", "/v1/agents?cursor=WzAsIDJd", None, 422),  # base64 of [0, 2]
        ("GET", f"/v1/agents/{agent['id']}/messages?cursor=WzEwMDAwMDAwMDAwMDAwMDAwMDAwMDAsICJ4Il0=", None, 422),
        ("GET", "/v1/agents?limit=0", None, 422),
        ("POST", f"/v1/agents/{agent['id']}/chat", {"message": ""}, 422),
        ("POST", f"/v1/agents/{agent['id']}/chat", {"text": "hi"}, 422),
        ("POST", f"/v1/agents/{unknown}/chat", {"message": "hi"}, 404),
        ("GET", f"/v1/agents/{agent['id']}/turns/{unknown}", None, 404),
        ("GET", f"/v1/agents/{agent['id']}/turns/nope", None, 422),
        ("GET", f"/v1/agents/{agent['id']}/memory/nope/history", None, 404),
        ("GET", f"/v1/agents/{agent['id']}/archival/{unknown}", None, 404),
        ("DELETE", f"/v1/agents/{agent['id']}/archival/{unknown}", None, 404),
        ("POST", f"/v1/agents/{agent['id']}/archival", {"content": ""}, 422),
        ("GET", f"/v1/agents/{agent['id']}/archival?k=0&query=x", None, 422),
        ("GET", "/v1/nothing-here", None, 404),
    ]
    for method, url, body, status in cases:
        response = client.request(method, url, json=body)
        assert response.status_code == status, (method, url, response.text)
        error = response.json()
        assert set(error) >= {"error", "detail"} and error["detail"], (method, url, error)


def test_malformed_json_body_is_422(client: TestClient) -> None:
    response = client.post("/v1/agents", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_text_postgres_cannot_store_is_422_not_500(client: TestClient, agent: dict) -> None:
    for method, url, body in [
        ("POST", "/v1/agents", {"name": "nul\x00byte"}),
        ("POST", f"/v1/agents/{agent['id']}/archival", {"content": "a\x00b"}),
        ("GET", f"/v1/agents/{agent['id']}/archival?tags=%00", None),
        ("PUT", f"/v1/agents/{agent['id']}/memory/human", {"value": "\x00"}),
    ]:
        response = client.request(method, url, json=body)
        assert response.status_code == 422, (method, url, response.text)
    undecodable = client.post("/v1/agents", content=b'{"name": "\xff\xfe"}', headers={"content-type": "application/json"})
    assert undecodable.status_code in (400, 422) and undecodable.json()["error"]


def test_unknown_fields_are_refused_not_dropped(client: TestClient, agent: dict) -> None:
    response = client.post("/v1/agents", json={"name": "x", "persona": "a cat"})
    assert response.status_code == 422 and response.json()["error"] == "invalid_request"
    assert "persona" in response.json()["detail"]
    typo = client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "tea", "tag": ["drinks"]})
    assert typo.status_code == 422 and "tag" in typo.json()["detail"]
    assert client.get(f"/v1/agents/{agent['id']}/archival").json()["items"] == []


def test_an_agents_name_is_its_own_within_a_tenant(client: TestClient) -> None:
    name = f"Mika {uuid.uuid4().hex[:6]}"
    first = client.post("/v1/agents", json={"name": name})
    assert first.status_code == 201
    again = client.post("/v1/agents", json={"name": name})
    assert again.status_code == 409 and name in again.json()["detail"]
    other = client.post("/v1/agents", json={"name": f"{name} too"}).json()
    renamed = client.patch(f"/v1/agents/{other['id']}", json={"name": name})
    assert renamed.status_code == 409
    assert client.patch(f"/v1/agents/{first.json()['id']}", json={"name": name, "system": "Be kind."}).status_code == 200
    listed = client.get("/v1/agents", params={"name": name}).json()["items"]
    assert [a["id"] for a in listed] == [first.json()["id"]]


def test_an_agent_is_found_by_its_name(client: TestClient) -> None:
    """`GET /v1/agents?name=`: the one agent with that name, or none (find it, or create it on a first run)."""
    name = f"アイコ's assistant {uuid.uuid4().hex[:6]}"
    created = client.post("/v1/agents", json={"name": name}).json()
    client.post("/v1/agents", json={"name": f"{name} too"})
    found = client.get("/v1/agents", params={"name": name})
    assert found.status_code == 200 and [a["id"] for a in found.json()["items"]] == [created["id"]]
    assert found.json()["next_cursor"] is None and found.json()["items"][0]["blocks"]
    for other in (name.upper(), name[:-1], f" {name}", "no such agent"):  # the whole name, as given
        assert client.get("/v1/agents", params={"name": other}).json() == {"items": [], "next_cursor": None}
    assert client.get("/v1/agents", params={"name": ""}).status_code == 422


def test_another_tenants_agent_is_not_found_by_its_name(keyed: TestClient) -> None:
    name = "Aiko"
    _, key_a = tenant_with_key(keyed, "name filter tenant a")
    _, key_b = tenant_with_key(keyed, "name filter tenant b")
    mine = keyed.post("/v1/agents", json={"name": name}, headers={"Authorization": f"Bearer {key_a}"}).json()
    listed = keyed.get("/v1/agents", params={"name": name}, headers={"Authorization": f"Bearer {key_a}"}).json()
    assert [a["id"] for a in listed["items"]] == [mine["id"]]
    assert keyed.get("/v1/agents", params={"name": name}, headers={"Authorization": f"Bearer {key_b}"}).json()["items"] == []


def test_agents_sharing_a_name_before_the_rule_keep_the_oldest_name(postgres_server: PostgresServer) -> None:
    url = create_database(postgres_server, f"engram_names_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM, "0013_term_counts")
    tenant = str(DEFAULT_TENANT_ID)
    for i, name in enumerate(["Mika", "Mika", "Ren", "Mika"]):
        run_sql(
            url,
            "INSERT INTO agents (id, tenant_id, name, created_at, updated_at, context_start_seq) "
            "VALUES (:id, :tenant, :name, now() + make_interval(secs => :i), now(), 0)",
            {"id": uuid.uuid4(), "tenant": uuid.UUID(tenant), "name": name, "i": i},
        )
    db.run_migrations(url, E5_DIM)
    names = [row[0] for row in run_sql(url, "SELECT name FROM agents ORDER BY created_at")]
    assert names == ["Mika", "Mika (2)", "Ren", "Mika (3)"]
