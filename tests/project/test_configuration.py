"""Configuration from the environment: an empty variable means unset, everywhere it is read."""

import pytest
import yaml

from app.llm.chat import ChatLLM
from app.llm.embeddings.providers import OpenAIEmbedder, build_embedder
from app.settings import OPENAI_DEFAULT_BASE_URL, Settings
from tests.support import ROOT


def test_an_empty_base_url_means_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    # What `docker compose` used to pass with OPENAI_API_KEY set and OPENAI_BASE_URL unset in the shell.
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = Settings(embedding_provider="openai")
    assert str(ChatLLM(settings)._client.base_url).rstrip("/") == OPENAI_DEFAULT_BASE_URL
    embedder = build_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder) and str(embedder._client.base_url).rstrip("/") == OPENAI_DEFAULT_BASE_URL


def test_compose_passes_no_empty_values() -> None:
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["engram"]
    for name, value in service["environment"].items():
        assert value is None or (isinstance(value, str) and value and ":-}" not in value), name
