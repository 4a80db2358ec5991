from app.chat.tools import CHAT_TOOLS
from app.llm.parsing import parse_text_tool_calls
from app.memory.search import lexical


def parse(text: str) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in parse_text_tool_calls(text, CHAT_TOOLS.params)]


def test_call_syntax_with_positional_and_keyword_arguments() -> None:
    assert parse('send_message("こんにちは")') == [("send_message", {"text": "こんにちは"})]
    assert parse("core_memory_update('human', '名前: 太郎')") == [
        ("core_memory_update", {"label": "human", "content": "名前: 太郎"})
    ]
    assert parse('send_message({"text": "hi"})') == [("send_message", {"text": "hi"})]
    assert parse('archival_memory_search(query="ramen", k=3)') == [("archival_memory_search", {"query": "ramen", "k": 3})]


def test_json_forms_and_several_calls() -> None:
    assert parse('{"name": "send_message", "arguments": {"text": "a"}}') == [("send_message", {"text": "a"})]
    assert parse('{"tool": "send_message", "args": "{\\"text\\": \\"b\\"}"}') == [("send_message", {"text": "b"})]
    assert parse('[{"function": {"name": "send_message", "arguments": {"text": "c"}}}]') == [("send_message", {"text": "c"})]
    assert parse('core_memory_append(label="human", content="x")\nsend_message("ok")') == [
        ("core_memory_append", {"label": "human", "content": "x"}),
        ("send_message", {"text": "ok"}),
    ]


def test_prose_and_unknown_names_are_not_calls() -> None:
    assert parse("I will call send_message now.") == []
    assert parse("print('hello')") == []
    assert parse('{"name": "rm_rf", "arguments": {}}') == []
    assert parse("send_message(") == []
    assert parse("send_message('a', 'b')") == []


def test_lexical_tokens_handle_japanese_without_spaces() -> None:
    tokens = lexical.tokens("僕の名前は太郎です。Ramen is GREAT")
    assert "太郎" in tokens and "名前" in tokens and "ramen" in tokens and "great" in tokens
    assert "is" not in tokens
    assert lexical.query_terms("   ") == [] and lexical.query_terms("猫 猫") == ["猫"]
    assert lexical.tokens("running runs") == ["run", "run"]  # English words are stemmed
    assert lexical.tokens("ｒａｍｅｎ") == ["ramen"]  # NFKC folds full-width letters
