"""Who a search query asks about, as speaker labels: the query's own words ("What did Caroline say…" names
`caroline`), `user` when it asks in the first person ("What did I…", "my…", 私) and `assistant` in the second
("What did you recommend…"). The hybrid search adds a share to the score of rows said by one of them
(app/memory/hybrid.py): in a two-person conversation the answer about Caroline is most often Caroline's own line,
and the answer to "how much did I earn" is what the user said, not the assistant's reply around it.

A row's speaker is its role (recall memory) or, for an archival passage, the label of a conversational line
("Caroline: …", "user: …", as a conversation is imported one turn a passage): `SPEAKER_LABEL_SQL`."""

import re
import unicodedata

_WORD = re.compile(r"\w+")
FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b|私|僕|俺|わたし|あたし", re.I)
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b|あなた", re.I)
# A passage's speaker: the label before the first colon of a line such as "Caroline: …" (at most 40 characters).
SPEAKER_LABEL_SQL = r"lower(substring(t.content from '^([^:\n]{1,40}):\s'))"


def speakers(query: str) -> list[str]:
    """The lower-cased labels whose lines the query asks about (any of its words may be a speaker's name)."""
    text = unicodedata.normalize("NFKC", query)
    named = set(_WORD.findall(text.lower()))
    if FIRST_PERSON.search(text):
        named.add("user")
    if SECOND_PERSON.search(text):
        named.add("assistant")
    return sorted(named)
