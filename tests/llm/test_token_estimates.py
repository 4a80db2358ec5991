"""The offline token estimate: ~4 characters per token for ASCII text, one token per character for other scripts."""

import pytest

from app.llm.tokens import estimate_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),  # rounded up: the estimate errs on the high side
        ("私の趣味は釣りです", 9),
        ("趣味: fishing", 3 + 2),  # "趣味" two tokens, ": fishing" 9 ASCII characters (3 tokens)
        ("café", 1 + 1),  # "caf" one token, "é" one
    ],
)
def test_ascii_counts_a_quarter_and_other_scripts_in_full(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens
