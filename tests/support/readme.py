"""The README's code blocks that tests run as written: each follows a `<!-- marker: … -->` comment."""

import re

from tests.support import ROOT

README = ROOT / "README.md"


def readme_block(marker: str, language: str) -> str:
    """The code of the first `language` block after the README's `<!-- marker:` comment."""
    marked = README.read_text().split(f"<!-- {marker}:", 1)[1]
    return re.search(rf"```{language}\n(.*?)```", marked, re.S).group(1)  # type: ignore[union-attr]
