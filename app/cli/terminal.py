"""Stored text as the client commands print it: its control characters (ESC, BEL, CR, the C1 range…) shown as
escapes (`\\x1b`), so that a memory, a name or a reply cannot drive the user's terminal: move the cursor, retitle
the window, rewrite what was printed. Rich's Text strips a few of them and passes ESC through; the standard
library's escaping (`repr`, `unicode_escape`) would escape every non-ASCII character too, Japanese included."""

import json
import sys
import unicodedata
from typing import Any

# Every character of Unicode's category Cc (C0, DEL, C1) but newline and tab, which lay text out.
_ESCAPES = {code: f"\\x{code:02x}" for code in range(0xA0) if unicodedata.category(chr(code)) == "Cc" and chr(code) not in "\n\t"}
# JSON escapes C0 itself; DEL and C1 it leaves raw: as \u escapes they stay valid JSON.
_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in _ESCAPES if code >= 0x7F}


def visible(text: str) -> str:
    """The text with its control characters (but newline and tab) escaped."""
    return text.translate(_ESCAPES)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def for_stdout(text: str) -> str:
    """A stored text alone on stdout: escaped for a terminal, whole when piped or redirected (the text is the data)."""
    return visible(text) if stdout_is_terminal() else text


def json_text(value: Any) -> str:
    """A value as indented JSON for the terminal: non-ASCII text as itself, control characters escaped."""
    return json.dumps(value, ensure_ascii=False, indent=2).translate(_JSON_ESCAPES)
