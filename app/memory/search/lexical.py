r"""Lexical tokens for full-text search in any script.

PostgreSQL's parsers split on spaces, so Japanese or Chinese text would become one giant token. Text is turned
into tokens here instead: NFKC-normalised, lower-cased words for spaced scripts (English words Snowball-stemmed,
stop words and single letters dropped); character bigrams (and single kanji/hanzi) for runs of CJK characters.
The tokens are stored in `search_text` and indexed by a generated `to_tsvector('simple', search_text)`; queries
are built from the same tokens and ranked with BM25 (app/memory/search/hybrid.py). Stop-word removal and stemming
are the classic IR gains, and they hold here: BM25 over these tokens finds far more evidence than over plain
lower-cased `\w+` tokens.
"""

import re
import unicodedata
from functools import lru_cache

import snowballstemmer

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
MAX_TOKEN_CHARS = 60  # tsvector lexemes are capped at 2 KB; longer runs are noise (hashes, base64)

# Function words that match almost every English passage and only dilute lexical ranking.
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by do does did for from had has have he her hers him his how i if in into is it its "
    "me my of on or our she so than that the their them then there these they this to was we were what when where "
    "which who whom why will with you your yours can could would should about been being am".split()
)


def tokens(text: str, *, stem: bool = True, stop_words: frozenset[str] = ENGLISH_STOPWORDS) -> list[str]:
    """`stem` and `stop_words` are what the service uses; the benchmarks measure the alternatives."""
    out: list[str] = []
    for run in _TOKEN.findall(unicodedata.normalize("NFKC", text).lower()):
        if _IS_CJK.match(run):
            out.extend(_cjk_tokens(run))
        elif run not in stop_words and (len(run) > 1 or run.isdigit()) and len(run) <= MAX_TOKEN_CHARS:
            out.append(_stem(run) if stem and run.isascii() and run.isalpha() else run)
    return out


_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=100_000)
def _stem(word: str) -> str:
    stem: str = _STEMMER.stemWord(word)
    return stem


def _cjk_tokens(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    return grams + [ch for ch in run if _IDEOGRAPH.match(ch)]


def fingerprint(text: str) -> str:
    """The letters and digits of a text, in order (NFKC, case-folded): equal for texts that differ only in
    punctuation, spacing, case or width. A text of neither (emoji, symbols) is its own fingerprint."""
    normalised = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in normalised if ch.isalnum()) or normalised.strip()


def search_text(text: str) -> str:
    return " ".join(tokens(text))


MAX_QUERY_TERMS = 64


def query_terms(text: str) -> list[str]:
    """The distinct tokens of a search query, in order."""
    return list(dict.fromkeys(tokens(text)))[:MAX_QUERY_TERMS]
