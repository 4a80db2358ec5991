"""The app as tests meet it: scripted settings, a client that fails a test on any 500, keys and tenants."""

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar, cast

import httpx
import openai
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.cli import client as cli_client
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM

LOOPBACK = ("127.0.0.1", 50000)
ADMIN_KEY = "admin-" + "k" * 32
Cli = Callable[..., None]
T = TypeVar("T")
# The API as a test calls it: the app in process (a TestClient, which is an httpx2 client) or a served Engram (an
# httpx client); the same calls either way.
ApiClient = TestClient | httpx.Client


def scripted_settings(database_url: str, llm: ScriptedLLM, **overrides: Any) -> Settings:
    """The service's settings with the scripted LLM as its endpoint (no retries: a test scripts each answer)."""
    defaults: dict[str, Any] = {
        "llm_max_retries": 0,
        "llm_timeout_seconds": 10,
        "turn_lock_timeout_seconds": 5,
        "db_pool_size": 5,  # many apps start and stop in a run; a few share one server at a time
    }
    return Settings(
        database_url=database_url,
        openai_base_url=llm.url,
        openai_api_key="test-key",
        llm_model="scripted-model",
        **(defaults | overrides),
    )


class CheckedClient(TestClient):
    """Records every status code so that a test fails if any request of it produced a 500."""

    statuses: list[tuple[str, int]]

    def request(self, method, url, *args, **kwargs):
        kwargs.pop("timeout", None)  # the CLI's timeouts mean nothing in process (and Starlette deprecates them here)
        response = super().request(method, url, *args, **kwargs)
        self.statuses.append((f"{method} {url}", response.status_code))
        return response


@contextmanager
def checked_client(app: FastAPI, client: tuple[str, int] = LOOPBACK) -> Iterator[CheckedClient]:
    """The only way tests talk to the app in-process: any request answered 500 fails the test."""
    with CheckedClient(app, raise_server_exceptions=False, client=client) as test_client:
        test_client.statuses = []
        yield test_client
    errors = [entry for entry in test_client.statuses if entry[1] == 500]
    assert not errors, f"requests answered 500: {errors}"


def admin(key: str = ADMIN_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def tenant_with_key(client: TestClient, name: str) -> tuple[str, str]:
    tenant = client.post("/v1/admin/tenants", json={"name": name}, headers=admin())
    assert tenant.status_code == 201, tenant.text
    issued = client.post(f"/v1/admin/tenants/{tenant.json()['id']}/keys", json={"name": "ci"}, headers=admin())
    assert issued.status_code == 201
    return tenant.json()["id"], issued.json()["key"]


def forget_agents_named(client: ApiClient, name: str) -> None:
    """Tests share one database, and an import refuses a name the tenant uses: clear it before importing a file."""
    for agent in client.get("/v1/agents", params={"name": name}).json()["items"]:
        assert client.delete(f"/v1/agents/{agent['id']}").status_code == 204


def openai_client(client: TestClient, key: str = "any-key") -> openai.OpenAI:
    """The OpenAI SDK over the app's in-process transport: same requests, headers and parsing as against a server."""
    return openai.OpenAI(base_url=f"{client.base_url}/v1", api_key=key, http_client=client, max_retries=0)


def app_of(client: TestClient) -> FastAPI:
    """The app a TestClient drives, create_app's (the TestClient takes any ASGI app)."""
    assert isinstance(client.app, FastAPI)
    return client.app


def run_in_app(client: TestClient, work: Callable[[], Awaitable[T]]) -> T:
    """`work()` awaited on the app's event loop, through the client's portal (there while the client is open)."""
    assert client.portal is not None
    return client.portal.call(work)


def cli_api(client: TestClient) -> cli_client.Api:
    """The CLI's client of the API over the app in process: the CLI takes an httpx client, and a TestClient (an
    httpx2 one) answers the same calls."""
    return cli_client.Api(cast(httpx.Client, client), "http://testserver")


def at(value: str) -> datetime:
    """A timestamp as the API writes it."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
