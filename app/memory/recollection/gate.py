"""The relevance gate of recollection: whether memory holds anything about the message at all. Some hit must be
close in meaning or share enough of the query's words. Close: its cosine similarity stands out from the query's
baseline (the margin over the query's similarity to generic text, on e5's scale, see app/memory/search/baseline.py;
a raw cosine cannot tell, since multilingual-e5 scores unrelated texts 0.75-0.85). Words: lexical coverage, the share
of the query's distinct tokens found in the hit (bigrams for Japanese). When nothing is evident, nothing goes in:
irrelevant memories mislead a model. A question about the asker's own life (`Baseline.personal`) needs less margin:
memory is where its answer would be. A query compared with fewer memories than the hits searched needs less too
(`min_margin`): the best of five unrelated memories stands out by chance less often than the best of thirty, so a
store of five answers "What do I do for a living?" from its first week. A question about the asker's own past that
names a time ("What did I do last week?") is answered by what was said then, in whatever words (`in_window`). A
message that only acknowledges ("Yes", "はい") asks nothing (`acknowledges`). The thresholds were chosen on LoCoMo,
LongMemEval, the Japanese set and the first-week set together (bench/recollection.py, bench/first_week.py)."""

import functools
import re
import unicodedata
from statistics import NormalDist

MIN_MARGIN = 0.08
# A question about the asker's own life (its Baseline.personal at least PERSONAL) needs less margin: memory is
# where its answer would be, and e5 gives a paraphrase across languages little margin ("せがれが放課後に打ちこむ
# スポーツは？", 0.070). 0.055 let in 3 of 20 off-topic messages (tests/data/off_topic_heldout.json), 0.065 one.
PERSONAL = 0.02
PERSONAL_MIN_MARGIN = 0.065
# The bars hold for a query compared with REFERENCE_COMPARED memories or more (the hits searched: every store of the
# benchmark sets); a smaller store's are lower (`min_margin`). MARGIN_SPREAD: the standard deviation of unrelated
# (message, memory) pairs' margins, FALSE_OPEN the chance the bar leaves to the best of them.
REFERENCE_COMPARED = 30
MARGIN_SPREAD = 0.028  # of the first-week set's (question, memory that does not answer it) pairs: 0.028 personal or not
FALSE_OPEN = 0.05
MIN_COVERAGE = 0.7
# A question about a time is handed what was said then and ranks among the best of it: within this share of its
# best fused score.
WINDOW_RATIO = 0.3
# Whole phrases, matched whole: "you" or "do" alone acknowledges nothing ("Will you do it?" asks)
_ACKNOWLEDGEMENTS = (
    "yes", "yeah", "yep", "yup", "no", "nope", "nah", "ok", "okay", "k", "sure", "thanks", "thank you", "thx", "ty",
    "great", "cool", "nice", "good", "fine", "perfect", "awesome", "alright", "all right", "right", "exactly",
    "indeed", "noted", "lol", "haha", "hmm", "hm", "oh", "ah", "wow", "bye", "hi", "hello", "hey", "so much",
    "a lot", "very much", "well done", "sounds good", "got it", "will do", "of course", "no problem", "good night",
    "good morning", "see you",
    "はい", "いいえ", "うん", "ううん", "ええ", "いや", "ありがとう", "ありがとうございます", "どうも", "了解", "了解です",
    "りょうかい", "わかった", "わかりました", "分かった", "分かりました", "なるほど", "そうですね", "そうだね", "そっか",
    "そうか", "おk", "おっけー", "オッケー", "いいね", "すごい", "笑", "おやすみ", "おやすみなさい", "こんにちは", "おはよう",
    "おはようございます", "こんばんは", "よろしく", "よろしくお願いします", "お疲れ様", "お疲れ様です",
)  # fmt: skip
_PHRASE = "|".join(r"\s+".join(map(re.escape, p.split())) for p in sorted(_ACKNOWLEDGEMENTS, key=len, reverse=True))
_ACKNOWLEDGEMENT = re.compile(rf"(?:(?:{_PHRASE})(?:\s+|$))*")
_NOT_WORDS = re.compile(r"[^\w]+|_")
MIN_QUERY_TOKENS_FOR_COVERAGE = 2


def min_margin(compared: int, personal: float) -> float:
    """The margin a hit needs to be evident when the query is compared with `compared` memories: the chance that one
    of them stands out by accident grows with their number. Unrelated pairs' margins spread about the baseline with
    a deviation of about MARGIN_SPREAD; the bar is the margin the best of `compared` unrelated memories would pass
    with the same probability as the best of REFERENCE_COMPARED does at the bar chosen on the benchmark sets (its
    expected maximum: the normal quantile of (1 - FALSE_OPEN) ** (1 / n)). From REFERENCE_COMPARED on, the bars are
    MIN_MARGIN and PERSONAL_MIN_MARGIN; below, lower: in a store of five memories the answer to "What do I do for a
    living?" stands only a little above the baseline, and few off-topic messages reach that."""
    bar = PERSONAL_MIN_MARGIN if personal >= PERSONAL else MIN_MARGIN
    n = max(1, min(compared, REFERENCE_COMPARED))
    return bar - MARGIN_SPREAD * (_expected_best(REFERENCE_COMPARED) - _expected_best(n))


@functools.cache
def _expected_best(n: int) -> float:
    return NormalDist().inv_cdf((1 - FALSE_OPEN) ** (1 / n))


def acknowledges(query: str) -> bool:
    """Whether the message only acknowledges or greets ("Yes", "ok thanks!", "はい、ありがとう"), or holds no word."""
    text = unicodedata.normalize("NFKC", query).casefold()
    return _ACKNOWLEDGEMENT.fullmatch(_NOT_WORDS.sub(" ", text).strip()) is not None


def coverage(query_tokens: frozenset[str], search_text: str) -> float:
    if len(query_tokens) < MIN_QUERY_TOKENS_FOR_COVERAGE:
        return 0.0
    return len(query_tokens & set(search_text.split())) / len(query_tokens)
