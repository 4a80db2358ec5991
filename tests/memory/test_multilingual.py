"""Japanese and cross-lingual memory: the set of tests/data/multilingual_memory.json (40 facts, 44 questions in
other words or another language) through the service's search, and the agent's own memory tools and automatic
recollection finding Japanese memories."""

import json
from collections import defaultdict
from typing import Any

from fastapi.testclient import TestClient

from app.memory.search import lexical
from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.support import DATA
from tests.support.chat import chat, reply_with_recalled_memories, tool_results

DATA = json.loads((DATA / "multilingual_memory.json").read_text())
FACTS: dict[str, str] = DATA["facts"]
QUESTIONS: list[dict[str, str]] = DATA["questions"]
# Top-3 hit rate each kind of question must reach (measured with multilingual-e5-small: bench/ARCHIVE.md).
MIN_TOP3 = {"ja": 0.9, "en-ja": 0.9, "mixed": 0.9, "ja-en": 0.5}


def store_facts(client: TestClient, agent: dict) -> None:
    response = client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": [{"content": f} for f in FACTS.values()]})
    assert response.status_code == 201 and not any(p["duplicate"] for p in response.json()["items"])


def test_the_set_asks_by_meaning_only() -> None:
    assert len(QUESTIONS) >= 30 and {q["kind"] for q in QUESTIONS} == set(MIN_TOP3)
    for q in QUESTIONS:
        if q["kind"] == "ja":  # a paraphrase shares no search token (word, bigram or kanji) with its fact
            assert not set(lexical.query_terms(q["question"])) & set(lexical.tokens(FACTS[q["fact"]])), q


def test_questions_in_other_words_or_languages_find_their_fact(client: TestClient, agent: dict) -> None:
    store_facts(client, agent)
    hits: dict[str, list[bool]] = defaultdict(list)
    for q in QUESTIONS:
        response = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": q["question"], "k": 3})
        assert response.status_code == 200
        hits[q["kind"]].append(FACTS[q["fact"]] in [h["content"] for h in response.json()["items"]])
    rates = {kind: sum(found) / len(found) for kind, found in hits.items()}
    assert all(rates[kind] >= floor for kind, floor in MIN_TOP3.items()), rates


def test_the_agent_finds_japanese_memories_with_archival_memory_search(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    store_facts(client, agent)
    llm.reset(
        tools(call("archival_memory_search", query="パートナーの職業は？")),
        tools(call("send_message", text="看護師さんですね。")),
    )
    turn = chat(client, agent, "うちの人の仕事、覚えてる？")
    [found, _] = tool_results(turn)
    assert found["ok"] and FACTS["husband_nurse"] in found["result"]


JAPANESE_FILLER = "今日は駅前の喫茶店で本を読み、帰りに商店街で買い物をして、夕方は洗濯物を片付けました。" * 12


def test_the_agent_finds_an_evicted_japanese_message_with_conversation_search(
    small_context: TestClient, llm: ScriptedLLM
) -> None:
    client = small_context
    agent = client.post("/v1/agents", json={"name": "日記"}).json()

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return tools(call("send_message", text="はい。")) if request.get("tools") else text("これまでの要約：日々の出来事。")

    llm.reset(fallback=answer)
    chat(client, agent, "覚えておいて：ロッカーの暗証番号は4471です。")
    for day in range(8):
        chat(client, agent, f"{day + 1}日目。{JAPANESE_FILLER}")
        if client.get(f"/v1/agents/{agent['id']}/context").json()["messages_out_of_context"] >= 2:
            break
    assert client.get(f"/v1/agents/{agent['id']}/context").json()["messages_out_of_context"] >= 2

    llm.reset(tools(call("conversation_search", query="更衣室の鍵のコードは？")), fallback=answer)
    [found, _] = tool_results(chat(client, agent, "あの番号、なんだっけ？"))
    assert found["ok"] and "4471" in found["result"]


def test_automatic_recollection_brings_japanese_memories_into_the_prompt(
    client: TestClient, agent: dict, llm: ScriptedLLM
) -> None:
    store_facts(client, agent)

    llm.reset(fallback=reply_with_recalled_memories)
    assert FACTS["grandmother"] in chat(client, agent, "おばあちゃんはどこで暮らしている？")["reply"]
    assert FACTS["cats"] in chat(client, agent, "What are my cats called?")["reply"]
    assert chat(client, agent, "量子コンピュータの仕組みを説明して。")["reply"] == "(nothing recalled)"
