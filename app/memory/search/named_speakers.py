"""Who a search query asks about, as speaker labels: the query's own words ("What did Caroline say…" names
`caroline`), the asker when it asks in the first person ("What did I…", "my…", 私) and the other side in the second
("What did you recommend…"): for a user's query `user` and `assistant`, for the agent's own search tools the
reverse. The hybrid search adds a share to the score of rows said by one of them
(app/memory/search/hybrid.py): in a two-person conversation the answer about Caroline is most often Caroline's own line,
and the answer to "how much did I earn" is what the user said, not the assistant's reply around it.

A row's speaker is its role (recall memory) or, for an archival passage, the label of a conversational line
("Caroline: …", "user: …", as a conversation is imported one turn a passage): `SPEAKER_LABEL_SQL`. A fact (a passage
with sources) was not said by anyone: it is about its subject, the word it starts with ("Caroline attended…",
"The user's wife…": user), which stands for the speaker whose lines it was drawn from: `PASSAGE_SPEAKER_SQL`."""

import re
import unicodedata
from typing import Literal

_WORD = re.compile(r"\w+")
FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b|私|僕|俺|わたし|あたし", re.I)
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b|あなた", re.I)
# A passage's speaker: what comes before the first colon of "Caroline: …", if within its first 41 characters (a
# passage without one is its own "label", which names no speaker but a one-word passage). split_part, not a regular
# expression: the pattern cost 1.4 ms a search over the ~200 candidates, split_part 0.1 ms.
SPEAKER_LABEL_SQL = "lower(split_part(left(t.content, 41), ':', 1))"
# A fact's subject: its first word (past an article), without a possessive or a label's colon ("Melanie's kids…",
# "The user's cat…", "Caroline: …" stored as a fact).
_FIRST_WORDS = "lower(left(t.content, 41))"
_SUBJECT_WORD = (
    f"CASE WHEN split_part({_FIRST_WORDS}, ' ', 1) IN ('the', 'a', 'an') THEN split_part({_FIRST_WORDS}, ' ', 2) "
    f"ELSE split_part({_FIRST_WORDS}, ' ', 1) END"
)
_SUBJECT_SQL = f"split_part(split_part(split_part({_SUBJECT_WORD}, '''', 1), '’', 1), ':', 1)"
PASSAGE_SPEAKER_SQL = f"CASE WHEN t.sources = '{{}}' THEN {SPEAKER_LABEL_SQL} ELSE {_SUBJECT_SQL} END"


Asker = Literal["user", "assistant"]


def speakers(query: str, asker: Asker = "user") -> list[str]:
    """The lower-cased labels whose lines the query asks about (any of its words may be a speaker's name). `asker`:
    who wrote the query — the user (a chat message, the API), or the assistant (the agent's own search tools, where
    "I" is the assistant and "you" the user)."""
    text = unicodedata.normalize("NFKC", query)
    named = set(_WORD.findall(text.lower()))
    other: Asker = "assistant" if asker == "user" else "user"
    if FIRST_PERSON.search(text):
        named.add(asker)
    if SECOND_PERSON.search(text):
        named.add(other)
    return sorted(named)
