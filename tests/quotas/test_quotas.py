"""Quotas (app/quotas): requests and turns per minute, LLM tokens per day, per tenant and per key; 429 with
Retry-After and X-RateLimit-* headers on every limited response; counters shared by replicas; admin usage;
nothing at all while off. The quota clock is frozen, so windows and resets are exact."""

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.llm.embeddings import Embedder
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.mcp import ACCEPT, INITIALIZE, error_text, over_http, use
from tests.support.service import ADMIN_KEY, admin, checked_client, tenant_with_key

NOW = datetime(2031, 5, 6, 12, 0, 30, tzinfo=UTC)  # 30 s into a minute, 43,170 s before midnight (UTC)
SERVICE = ("10.1.2.3", 40000)
Clients = Callable[..., AbstractContextManager[TestClient]]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    """The quotas' time, frozen at NOW (moving it: clock[0] = ...)."""
    moment = [NOW]
    monkeypatch.setattr("app.quotas.service.utcnow", lambda: moment[0])
    return moment


@pytest.fixture
def service(keyed_database: str, embedder: Embedder, llm: ScriptedLLM, clock: list[datetime]) -> Clients:
    """Opens a service (a replica) with the given quota settings on this module's database."""
    llm.reset(fallback=tools(call("send_message", text="ok")))

    def open_service(**quotas: Any) -> AbstractContextManager[TestClient]:
        settings = Settings(
            database_url=keyed_database,
            admin_key=ADMIN_KEY,
            openai_base_url=llm.url,
            openai_api_key="t",
            llm_model="m",
            llm_max_retries=0,
            **quotas,
        )
        return checked_client(create_app(settings, embedder=embedder), client=SERVICE)

    return open_service


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def new_agent(client: TestClient, key: str) -> dict[str, Any]:
    response = client.post("/v1/agents", json={"name": "quota agent"}, headers=bearer(key))
    assert response.status_code == 201, response.text
    return response.json()


def refusals(metric: str, scope: str) -> float:
    return REGISTRY.get_sample_value("engram_quota_refusals_total", {"metric": metric, "scope": scope}) or 0.0


def test_requests_per_minute_trip_with_429_and_headers_and_spare_other_tenants(service: Clients) -> None:
    with service(quota_requests_per_minute=3) as client:
        _, key = tenant_with_key(client, "busy")
        _, other = tenant_with_key(client, "quiet")
        before = refusals("requests", "tenant")
        for remaining in ("2", "1", "0"):
            ok = client.get("/v1/agents", headers=bearer(key))
            assert ok.status_code == 200
            assert ok.headers["X-RateLimit-Limit-Requests"] == "3"
            assert ok.headers["X-RateLimit-Remaining-Requests"] == remaining
            assert ok.headers["X-RateLimit-Reset-Requests"] == "30s"
        refused = client.get("/v1/agents", headers=bearer(key))
        assert refused.status_code == 429
        assert refused.json() == {
            "error": "quota_exceeded",
            "detail": "this tenant's quota of 3 requests per minute is used up; retry in 30 s",
        }
        assert refused.headers["Retry-After"] == "30"
        assert refused.headers["X-RateLimit-Remaining-Requests"] == "0"
        assert refusals("requests", "tenant") == before + 1
        spared = client.get("/v1/agents", headers=bearer(other))
        assert spared.status_code == 200 and spared.headers["X-RateLimit-Remaining-Requests"] == "2"
        # Turn-only headers appear only where a turn was counted; the admin key is never limited.
        assert "X-RateLimit-Limit-Turns" not in spared.headers
        assert "X-RateLimit-Limit-Requests" not in client.get("/v1/admin/tenants", headers=admin()).headers


def test_the_counters_are_shared_by_replicas(service: Clients, clock: list[datetime]) -> None:
    with service(quota_requests_per_minute=3) as first, service(quota_requests_per_minute=3) as second:
        _, key = tenant_with_key(first, "replicated")
        assert first.get("/v1/agents", headers=bearer(key)).status_code == 200
        assert second.get("/v1/agents", headers=bearer(key)).status_code == 200
        assert first.get("/v1/agents", headers=bearer(key)).headers["X-RateLimit-Remaining-Requests"] == "0"
        assert second.get("/v1/agents", headers=bearer(key)).status_code == 429
        clock[0] = NOW + timedelta(seconds=30)  # the next minute: a fresh window
        assert second.get("/v1/agents", headers=bearer(key)).headers["X-RateLimit-Remaining-Requests"] == "2"


def test_turns_per_minute_refuse_before_any_llm_call_on_every_chat_route(service: Clients, llm: ScriptedLLM) -> None:
    with service(quota_turns_per_minute=2) as client:
        _, key = tenant_with_key(client, "chatty")
        _, other = tenant_with_key(client, "calm")
        agent = new_agent(client, key)
        for remaining in ("1", "0"):
            turn = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hi"}, headers=bearer(key))
            assert turn.status_code == 200, turn.text
            assert turn.headers["X-RateLimit-Remaining-Turns"] == remaining
            assert turn.headers["X-RateLimit-Limit-Turns"] == "2"
        calls = len(llm.requests)
        refused = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hi"}, headers=bearer(key))
        assert refused.status_code == 429 and refused.json()["error"] == "quota_exceeded"
        assert refused.headers["Retry-After"] == "30" and refused.headers["X-RateLimit-Remaining-Turns"] == "0"
        streamed = client.post(
            f"/v1/agents/{agent['id']}/chat",
            json={"message": "hi"},
            headers=bearer(key) | {"Accept": "text/event-stream"},
        )
        assert streamed.status_code == 429 and streamed.headers["Retry-After"] == "30"
        openai = client.post(
            "/v1/chat/completions",
            json={"model": agent["id"], "messages": [{"role": "user", "content": "hi"}]},
            headers=bearer(key),
        )
        assert openai.status_code == 429 and openai.headers["Retry-After"] == "30"
        assert openai.json()["error"]["type"] == "rate_limit_error" and openai.json()["error"]["code"] == "quota_exceeded"
        assert len(llm.requests) == calls  # no refused turn reached the LLM
        turns = client.get(f"/v1/agents/{agent['id']}/messages", headers=bearer(key)).json()["items"]
        assert [m["role"] for m in turns].count("user") == 2  # nor stored a message
        spared = new_agent(client, other)
        assert client.post(f"/v1/agents/{spared['id']}/chat", json={"message": "hi"}, headers=bearer(other)).status_code == 200


def test_llm_tokens_per_day_counted_from_reported_usage_and_refused_when_spent(
    service: Clients, llm: ScriptedLLM, clock: list[datetime]
) -> None:
    with service(quota_llm_tokens_per_day=50) as client:
        tenant_id, key = tenant_with_key(client, "spender")
        agent = new_agent(client, key)
        first = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hi"}, headers=bearer(key))
        assert first.status_code == 200
        usage = first.json()["usage"]
        spent = usage["prompt_tokens"] + usage["completion_tokens"]
        assert spent > 50  # the scripted LLM reports the prompt's size: one turn overshoots this budget
        # A turn answered in one response tells the standing after it (a streamed one: when it was admitted).
        assert first.headers["X-RateLimit-Limit-Tokens"] == "50"
        assert first.headers["X-RateLimit-Remaining-Tokens"] == "0"
        calls = len(llm.requests)
        refused = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "again"}, headers=bearer(key))
        assert refused.status_code == 429
        assert refused.json()["detail"] == ("this tenant's quota of 50 LLM tokens per day (UTC) is used up; retry in 43170 s")
        assert refused.headers["Retry-After"] == "43170"
        assert refused.headers["X-RateLimit-Remaining-Tokens"] == "0"
        assert refused.headers["X-RateLimit-Reset-Tokens"] == "43170s"
        assert len(llm.requests) == calls
        usage_report = client.get("/v1/admin/usage", headers=admin()).json()["items"]
        mine = next(row for row in usage_report if row["tenant_id"] == tenant_id)
        assert mine["llm_tokens"]["used"] == spent and mine["llm_tokens"]["limit"] == 50
        clock[0] = NOW + timedelta(days=1)  # a new UTC day, a new budget
        assert client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hi"}, headers=bearer(key)).status_code == 200


def test_admin_usage_reports_each_tenants_counts(service: Clients) -> None:
    with service(quota_requests_per_minute=100, quota_turns_per_minute=10) as client:
        tenant_id, key = tenant_with_key(client, "reported")
        idle_id, idle_key = tenant_with_key(client, "idle")
        agent = new_agent(client, key)  # request 1
        client.get("/v1/agents", headers=bearer(key))  # request 2
        client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hi"}, headers=bearer(key))  # request 3, turn 1
        usage = client.get("/v1/admin/usage", headers=admin())
        assert usage.status_code == 200
        rows = {row["tenant_id"]: row for row in usage.json()["items"]}
        mine = rows[tenant_id]
        assert (mine["name"], mine["requests"]["used"], mine["turns"]["used"]) == ("reported", 3, 1)
        assert mine["llm_tokens"]["used"] > 0 and mine["llm_tokens"]["limit"] is None
        assert mine["requests"]["limit"] == 100 and mine["turns"]["limit"] == 10
        assert mine["requests"]["window_start"].startswith("2031-05-06T12:00:00")
        assert mine["llm_tokens"]["resets_at"].startswith("2031-05-07T00:00:00")
        assert (rows[idle_id]["requests"]["used"], rows[idle_id]["turns"]["used"]) == (0, 0)
        assert client.get("/v1/admin/usage", headers=bearer(idle_key)).status_code == 403


def test_a_keys_own_limits_apply_to_it_alone(service: Clients) -> None:
    with service() as client:  # no tenant quotas: only the key's own
        tenant_id = client.post("/v1/admin/tenants", json={"name": "keyed"}, headers=admin()).json()["id"]
        issued = client.post(
            f"/v1/admin/tenants/{tenant_id}/keys", json={"name": "tight", "requests_per_minute": 2}, headers=admin()
        )
        assert issued.status_code == 201 and issued.json()["requests_per_minute"] == 2
        tight = issued.json()
        free = client.post(f"/v1/admin/tenants/{tenant_id}/keys", json={"name": "free"}, headers=admin()).json()
        assert [client.get("/v1/agents", headers=bearer(tight["key"])).status_code for _ in range(3)] == [200, 200, 429]
        refused = client.get("/v1/agents", headers=bearer(tight["key"]))
        assert refused.json()["detail"].startswith("this API key's quota of 2 requests per minute")
        spared = client.get("/v1/agents", headers=bearer(free["key"]))
        assert spared.status_code == 200 and "X-RateLimit-Limit-Requests" not in spared.headers
        raised = client.patch(f"/v1/admin/keys/{tight['id']}", json={"requests_per_minute": 5}, headers=admin())
        assert raised.status_code == 200 and raised.json()["requests_per_minute"] == 5
        again = client.get("/v1/agents", headers=bearer(tight["key"]))
        assert again.status_code == 200 and again.headers["X-RateLimit-Remaining-Requests"] == "2"
        bad = client.patch(f"/v1/admin/keys/{tight['id']}", json={"requests_per_minute": 0}, headers=admin())
        assert bad.status_code == 422 and bad.json()["error"] == "invalid_request"
        removed = client.patch(f"/v1/admin/keys/{tight['id']}", json={"requests_per_minute": None}, headers=admin())
        assert removed.json()["requests_per_minute"] is None
        assert "X-RateLimit-Limit-Requests" not in client.get("/v1/agents", headers=bearer(tight["key"])).headers


def test_a_refusal_by_the_key_does_not_count_against_its_tenant(service: Clients) -> None:
    with service(quota_requests_per_minute=10) as client:
        tenant_id = client.post("/v1/admin/tenants", json={"name": "both"}, headers=admin()).json()["id"]
        key = client.post(f"/v1/admin/tenants/{tenant_id}/keys", json={"requests_per_minute": 1}, headers=admin()).json()["key"]
        first = client.get("/v1/agents", headers=bearer(key))
        assert first.headers["X-RateLimit-Remaining-Requests"] == "0"  # the key's standing: the tighter one
        assert client.get("/v1/agents", headers=bearer(key)).status_code == 429
        rows = client.get("/v1/admin/usage", headers=admin()).json()["items"]
        assert next(r for r in rows if r["tenant_id"] == tenant_id)["requests"]["used"] == 1


def test_off_by_default_no_headers_no_limits_yet_use_is_counted(service: Clients) -> None:
    with service() as client:
        tenant_id, key = tenant_with_key(client, "unlimited")
        agent = new_agent(client, key)
        for _ in range(5):
            response = client.get("/v1/agents", headers=bearer(key))
            assert response.status_code == 200
            assert not [h for h in response.headers if h.lower().startswith("x-ratelimit")]
        turn = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "hi"}, headers=bearer(key))
        assert turn.status_code == 200 and "x-ratelimit-limit-turns" not in turn.headers
        # Counted all the same (in memory, written a second later or when the report is read): 7 requests, 1 turn.
        mine = next(r for r in client.get("/v1/admin/usage", headers=admin()).json()["items"] if r["tenant_id"] == tenant_id)
        assert (mine["requests"]["used"], mine["turns"]["used"], mine["requests"]["limit"]) == (7, 1, None)
        assert mine["llm_tokens"]["used"] == turn.json()["usage"]["prompt_tokens"] + turn.json()["usage"]["completion_tokens"]


def test_websocket_turns_are_refused_with_an_error_event_and_the_socket_stays(service: Clients, llm: ScriptedLLM) -> None:
    with service(quota_turns_per_minute=1) as client:
        _, key = tenant_with_key(client, "socket")
        agent = new_agent(client, key)
        with client.websocket_connect(f"/v1/agents/{agent['id']}/ws", headers=bearer(key)) as ws:
            ws.send_json({"type": "chat", "message": "first"})
            while ws.receive_json()["type"] != "turn_completed":
                pass
            calls = len(llm.requests)
            for message in ("second", "third"):  # still open and listening after a refusal
                ws.send_json({"type": "chat", "message": message})
                refused = ws.receive_json()
                assert (refused["type"], refused["code"]) == ("error", "quota_exceeded")
                assert "1 chat turns per minute" in refused["detail"] and "retry in 30 s" in refused["detail"]
        assert len(llm.requests) == calls


async def test_mcp_requests_and_turns_are_limited_the_same_way(service: Clients) -> None:
    with service(quota_requests_per_minute=1) as client:
        _, key = tenant_with_key(client, "mcp requests")
        first = client.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "X-API-Key": key})
        assert first.status_code == 200 and first.headers["X-RateLimit-Remaining-Requests"] == "0"
        refused = client.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "X-API-Key": key})
        assert refused.status_code == 429 and refused.json()["error"] == "quota_exceeded"
    with service(quota_turns_per_minute=1) as client:
        _, key = tenant_with_key(client, "mcp turns")
        agent = new_agent(client, key)
        async with over_http(client, key) as session:
            await use(session, "chat_with_agent", agent_id=agent["id"], message="hi")
            again = await session.call_tool("chat_with_agent", {"agent_id": agent["id"], "message": "again"})
            assert "quota_exceeded: this tenant's quota of 1 chat turns per minute" in error_text(again)
