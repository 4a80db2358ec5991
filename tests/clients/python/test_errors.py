"""Each error type raised on the status the served Engram answers: 401 and 403 from a service with API keys, 429
from a key's own quota (not tried again past `max_retry_wait`, `retry_after` from the answer), 503 from a service
without an LLM (raised at once: Engram marks a 503 that passes with Retry-After, and this one has none). The other
statuses (404, 409, 412, 413, 422, 502) are raised in the tests of the calls that provoke them."""

import time
from collections.abc import Iterator

import httpx
import pytest
from engram_client import (
    AuthenticationError,
    Engram,
    EngramConnectionError,
    EngramError,
    PermissionDenied,
    RateLimited,
    ServiceUnavailable,
)

from app.llm.embeddings import Embedder
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, free_port
from tests.clients.python.conftest import Statuses, unique
from tests.support.served import Served
from tests.support.service import ADMIN_KEY, admin, scripted_settings


@pytest.fixture(scope="module")
def keyed(keyed_database: str, llm: ScriptedLLM, embedder: Embedder) -> Iterator[Served]:
    with Served(scripted_settings(keyed_database, llm, admin_key=ADMIN_KEY), embedder) as served:
        yield served


def issued_key(served: Served, **limits: int) -> str:
    with served.api() as api:
        tenant = api.post("/v1/admin/tenants", json={"name": unique("tenant")}, headers=admin()).json()
        issued = api.post(f"/v1/admin/tenants/{tenant['id']}/keys", json={"name": "ci", **limits}, headers=admin())
        assert issued.status_code == 201, issued.text
        return str(issued.json()["key"])


def test_a_missing_or_wrong_key_is_an_authentication_error_and_the_admin_key_a_permission_denied(keyed: Served) -> None:
    for key in ("", "wrong-key"):
        with Engram(keyed.url, api_key=key) as engram, pytest.raises(AuthenticationError) as refused:
            engram.agents.list()
        assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    with Engram(keyed.url, api_key=ADMIN_KEY) as engram, pytest.raises(PermissionDenied) as forbidden:
        engram.agents.list()
    assert forbidden.value.status == 403 and "tenant's API key" in forbidden.value.message


def test_the_key_is_taken_from_the_environment(keyed: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_URL", keyed.url)
    monkeypatch.setenv("ENGRAM_API_KEY", issued_key(keyed))
    with Engram() as engram:
        created = engram.agents.create(unique("keyed"))
        assert engram.agents.list().items == [created]  # the tenant's agents: this one alone


def test_a_quota_used_up_is_rate_limited_with_its_retry_after_and_the_request_id(keyed: Served) -> None:
    statuses = Statuses()
    key = issued_key(keyed, requests_per_minute=2)
    with httpx.Client(timeout=30, event_hooks={"response": [statuses.record]}) as http:
        # A wait longer than the client takes is not waited for (the quota's lasts to the end of its minute).
        with Engram(keyed.url, api_key=key, max_retry_wait=0.001, http_client=http) as engram:
            with pytest.raises(RateLimited) as limited:
                for _ in range(6):  # 2 a minute: the third within one minute is refused
                    engram.agents.list()
            started = time.monotonic()
            with pytest.raises(RateLimited):
                engram.agents.list()
            assert time.monotonic() - started < 1
    refusal = limited.value
    assert (refusal.status, refusal.code) == (429, "quota_exceeded") and "requests per minute" in refusal.message
    assert refusal.retry_after is not None and 0 < refusal.retry_after <= 60
    assert statuses[-1][1] == 429 and sum(status == 429 for _, status in statuses) == 2  # each refusal asked once
    assert refusal.request_id is not None and len(refusal.request_id) == 32


def test_chat_without_an_llm_is_service_unavailable_raised_at_once(settings: Settings, embedder: Embedder) -> None:
    no_llm = settings.model_copy(update={"openai_base_url": None, "openai_api_key": None, "llm_model": None})
    statuses = Statuses()
    with Served(no_llm, embedder) as served, httpx.Client(event_hooks={"response": [statuses.record]}) as http:
        with Engram(served.url, http_client=http) as engram:
            agent = engram.agents.create(unique("mute"))
            try:
                with pytest.raises(ServiceUnavailable) as unavailable:
                    engram.chat(agent.id, "Hello?")
            finally:
                engram.agents.delete(agent.id)
    assert (unavailable.value.status, unavailable.value.retry_after) == (503, None)
    assert "no LLM is configured" in unavailable.value.message
    assert [s for s in statuses if s[0].endswith("/chat")] == [(f"POST /v1/agents/{agent.id}/chat", 503)]  # not retried


def test_a_service_that_cannot_be_reached_is_a_connection_error() -> None:
    with Engram(f"http://127.0.0.1:{free_port()}") as engram, pytest.raises(EngramConnectionError) as unreachable:
        engram.agents.list()
    assert (unreachable.value.status, unreachable.value.code) == (0, "connection_error")
    assert isinstance(unreachable.value, EngramError) and "ConnectError" in unreachable.value.message
