"""The code blocks of the README (and docs/) that tests run as written: each follows a `<!-- marker: … -->` comment."""

import re
from pathlib import Path

from tests.support import ROOT, matched

README = ROOT / "README.md"


def readme_block(marker: str, language: str, document: Path = README) -> str:
    """The code of the first `language` block after the `<!-- marker:` comment of the README (or `document`)."""
    marked = document.read_text().split(f"<!-- {marker}:", 1)[1]
    return matched(re.search(rf"```{language}\n(.*?)```", marked, re.S)).group(1)
