"""API keys and tenants: keys shown once and stored hashed, revocation, loopback-only without keys, and tenant
isolation on every agent endpoint (another tenant's agent is a 404)."""

import asyncio
import uuid

import pytest
from fastapi import WebSocketDisconnect
from fastapi.testclient import TestClient
from sqlalchemy import text

from app import db
from app.auth.keys import hash_key
from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from tests.support.service import admin, checked_client, tenant_with_key

BODIES = {
    ("PATCH", "/v1/agents/{agent_id}"): {"name": "stolen"},
    ("POST", "/v1/agents/{agent_id}/chat"): {"message": "hi"},
    ("PUT", "/v1/agents/{agent_id}/memory/{label}"): {"value": "pwned"},
    ("POST", "/v1/agents/{agent_id}/archival"): {"content": "x"},
    ("POST", "/v1/agents/{agent_id}/archival/batch"): {"items": [{"content": "x"}]},
    ("POST", "/v1/agents/{agent_id}/archival/import"): [{"content": "x"}],
    # Letta's API under /letta: the same agents, the same tenant boundary.
    ("PATCH", "/letta/v1/agents/{agent_id}"): {"name": "stolen"},
    ("PATCH", "/letta/v1/agents/{agent_id}/core-memory/blocks/{block_label}"): {"value": "pwned"},
    ("POST", "/letta/v1/agents/{agent_id}/archival-memory"): {"text": "x"},
    ("POST", "/letta/v1/agents/{agent_id}/messages"): {"messages": [{"role": "user", "content": "hi"}]},
    ("POST", "/letta/v1/agents/{agent_id}/messages/stream"): {"messages": [{"role": "user", "content": "hi"}]},
}


def test_keys_are_shown_once_and_revocable(keyed: TestClient) -> None:
    tenant_id, key = tenant_with_key(keyed, "acme")
    assert key.startswith("engk_") and len(key) > 40
    listed = keyed.get(f"/v1/admin/tenants/{tenant_id}/keys", headers=admin()).json()["items"]
    assert len(listed) == 1 and "key" not in listed[0] and key.startswith(listed[0]["prefix"])
    assert keyed.get("/v1/agents", headers={"X-API-Key": key}).status_code == 200
    assert keyed.delete(f"/v1/admin/keys/{listed[0]['id']}", headers=admin()).status_code == 204
    revoked = keyed.get("/v1/agents", headers={"X-API-Key": key})
    assert revoked.status_code == 401 and revoked.json()["error"] == "unauthorized"


def test_requests_without_a_valid_key_are_refused(keyed: TestClient) -> None:
    _, key = tenant_with_key(keyed, "beta")
    assert keyed.get("/v1/agents").status_code == 401
    assert keyed.get("/v1/agents", headers=admin("engk_wrong")).status_code == 401
    assert keyed.get("/v1/agents", headers=admin()).status_code == 403  # the admin key is not a tenant
    assert keyed.post("/v1/admin/tenants", json={"name": "x"}, headers=admin(key)).status_code == 403
    assert keyed.get("/healthz").status_code == 200 and keyed.get("/readyz").status_code == 200


def test_only_the_hash_of_a_key_is_stored(keyed: TestClient, keyed_database: str) -> None:
    _, key = tenant_with_key(keyed, "gamma")

    async def stored_columns() -> list[str]:
        engine = db.create_engine(keyed_database)
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT * FROM api_keys"))).all()
        await engine.dispose()
        return [str(value) for row in rows for value in row]

    values = asyncio.run(stored_columns())
    assert key not in values and hash_key(key) in values


def test_every_agent_endpoint_hides_other_tenants_agents(keyed: TestClient) -> None:
    _, key_a = tenant_with_key(keyed, "tenant-a")
    _, key_b = tenant_with_key(keyed, "tenant-b")
    a, b = {"X-API-Key": key_a}, {"X-API-Key": key_b}
    agent = keyed.post("/v1/agents", json={"name": "private"}, headers=a).json()
    passage = keyed.post(f"/v1/agents/{agent['id']}/archival", json={"content": "secret"}, headers=a).json()
    job = keyed.post(f"/v1/agents/{agent['id']}/archival/import", json=[{"content": "secret too"}], headers=a).json()
    said = {"messages": [{"role": "user", "content": "a secret line"}]}
    [message_id] = keyed.post(f"/v1/agents/{agent['id']}/messages", json=said, headers=a).json()["message_ids"]
    keyed.put(f"/v1/agents/{agent['id']}/archival/keys/secret", json={"content": "a keyed secret"}, headers=a)
    spec = keyed.get("/openapi.json").json()
    tried = 0
    for path, operations in spec["paths"].items():
        if "{agent_id}" not in path:
            continue
        for method in operations:
            url = path.format(
                agent_id=agent["id"],
                label="human",
                block_label="human",
                passage_id=passage["id"],
                memory_id=passage["id"],
                turn_id=uuid.uuid4(),
                job_id=job["id"],
                message_id=message_id,
                key="secret",
            )
            response = keyed.request(method.upper(), url, json=BODIES.get((method.upper(), path)), headers=b)
            assert response.status_code == 404, (method, path, response.status_code, response.text)
            tried += 1
    assert tried >= 25  # Engram's agent endpoints and Letta's
    assert keyed.get("/v1/agents", headers=b).json()["items"] == []
    assert keyed.get(f"/v1/agents/{agent['id']}", headers=a).json()["name"] == "private"  # untouched
    assert keyed.get(f"/v1/agents/{agent['id']}/archival/{passage['id']}", headers=a).status_code == 200
    assert keyed.get(f"/v1/agents/{agent['id']}/archival/keys/secret", headers=a).json()["content"] == "a keyed secret"
    assert [m["id"] for m in keyed.get(f"/v1/agents/{agent['id']}/messages", headers=a).json()["items"]] == [message_id]
    with keyed.websocket_connect(f"/v1/agents/{agent['id']}/ws", headers=b) as ws:
        assert ws.receive_json()["code"] == "not_found"


def test_websocket_takes_the_key_from_headers_or_a_first_message(keyed: TestClient) -> None:
    _, key = tenant_with_key(keyed, "ws-tenant")
    agent = keyed.post("/v1/agents", json={"name": "w"}, headers={"X-API-Key": key}).json()
    with keyed.websocket_connect(f"/v1/agents/{agent['id']}/ws", headers={"Authorization": f"Bearer {key}"}) as ws:
        ws.send_text("not a command")
        assert ws.receive_json()["code"] == "invalid_request"  # authenticated: it is listening
    with keyed.websocket_connect(f"/v1/agents/{agent['id']}/ws") as ws:
        ws.send_json({"type": "auth", "api_key": key})
        ws.send_text("still not a command")
        assert ws.receive_json()["code"] == "invalid_request"
    with keyed.websocket_connect(f"/v1/agents/{agent['id']}/ws") as ws:
        ws.close()  # gone before saying who it is: the server lets it go without an error
    with keyed.websocket_connect(f"/v1/agents/{agent['id']}/ws") as ws:
        ws.send_json({"type": "auth", "api_key": "engk_forged"})
        assert ws.receive_json()["code"] == "unauthorized"
        with pytest.raises(WebSocketDisconnect):
            ws.receive_json()


def test_without_keys_only_loopback_clients_are_served(database_url: str, embedder: Embedder) -> None:
    open_settings = Settings(database_url=database_url)
    with checked_client(create_app(open_settings, embedder=embedder), client=("203.0.113.9", 1234)) as remote:
        refused = remote.get("/v1/agents")
        assert refused.status_code == 403 and "loopback" in refused.json()["detail"]
    with checked_client(create_app(open_settings, embedder=embedder)) as local:
        assert local.get("/v1/agents").status_code == 200
