"""Offline token estimates. No tokenizer is downloaded at run time, and the same count must serve OpenAI, Gemini
and local models, so this errs on the high side of common BPE tokenizers: ~4 characters per token for Latin
text, one token per character for CJK and other scripts (cl100k/o200k give 0.6-1.0 per Japanese character)."""

import json
from typing import Any

MESSAGE_OVERHEAD = 4  # role and separators per chat message


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))  # C speed: every turn, every message
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def message_tokens(message: dict[str, Any]) -> int:
    total = MESSAGE_OVERHEAD + estimate_tokens(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        total += estimate_tokens(call["function"]["name"]) + estimate_tokens(call["function"]["arguments"]) + MESSAGE_OVERHEAD
    return total


def json_tokens(value: Any) -> int:
    return estimate_tokens(json.dumps(value, ensure_ascii=False))
