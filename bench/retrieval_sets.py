"""The retrieval evaluation sets in one shape: corpora of passages (one conversational turn each, `"Speaker: text"`,
as a user would store them), each with questions whose evidence is a set of passage indices and a category.

- LongMemEval_S dev (`../shared/data/longmemeval_s_dev28.json`): one corpus per question (its ~500-turn haystack),
  evidence = turns marked `has_answer`, category = `question_type`.
- LoCoMo dev (`../shared/data/locomo_dev5.json`): one corpus per conversation (~400-700 short turns), its questions
  of categories 1-4 (5, adversarial, has no evidence), evidence = their `dia_id`s; each turn dated by its session.
- Japanese (`tests/data/multilingual_memory.json`): one corpus of 40 facts, 44 questions in other words, category =
  kind (ja, en-ja, ja-en, mixed); its `unrelated` questions have no evidence (the recollection gate's test).
"""

import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
LONGMEMEVAL = SHARED_DATA / "longmemeval_s_dev28.json"
LOCOMO = SHARED_DATA / "locomo_dev5.json"
JAPANESE = ROOT / "tests" / "data" / "multilingual_memory.json"
MAX_CHARS = 2000  # a LongMemEval turn can be tens of thousands of characters; the head says what it is about
KS = (1, 3, 5, 10)  # the ranks recall is measured at
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class Question:
    text: str
    category: str
    evidence: frozenset[int]  # indices into the corpus' passages; empty: nothing in memory answers it
    asked_at: datetime | None = None  # LongMemEval: its question_date
    answer: str = ""  # the gold answer (LongMemEval, LoCoMo): bench/recollection.py asks what is shown to keep its words


@dataclass
class Fact:
    """A fact written from the conversation (LoCoMo's `observation`): its text, its session's date, and the passages
    (turns) it names as its sources."""

    text: str
    date: datetime
    sources: frozenset[int]


@dataclass
class Corpus:
    name: str
    passages: list[str]
    questions: list[Question] = field(default_factory=list)
    dates: list[datetime] | None = None  # per passage, when it was said (its session's date)
    facts: list[Fact] = field(default_factory=list)  # stored beside the passages, with their sources


def _longmemeval_date(value: str) -> datetime:
    """ "2023/05/20 (Sat) 02:21" (no zone given: UTC)."""
    return datetime.strptime(re.sub(r"\s*\(\w+\)", "", value), "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


@dataclass
class RetrievalSet:
    name: str
    corpora: list[Corpus]

    @property
    def questions(self) -> list[tuple[Corpus, Question]]:
        return [(c, q) for c in self.corpora for q in c.questions]


def _parsed(value: Any) -> Any:
    """Some exports store lists/objects as JSON text; accept both."""
    return json.loads(value) if isinstance(value, str) and value.strip()[:1] in ("[", "{") else value


def longmemeval(path: Path = LONGMEMEVAL, limit: int | None = None) -> RetrievalSet:
    corpora = []
    for q in _parsed(json.loads(path.read_text()))[: limit or None]:
        passages: list[str] = []
        evidence: set[int] = set()
        dates: list[datetime] = []
        for session, date in zip(_parsed(q["haystack_sessions"]), _parsed(q["haystack_dates"]), strict=True):
            for turn in _parsed(session):
                turn = _parsed(turn)
                if str(turn.get("has_answer", False)).lower() == "true":
                    evidence.add(len(passages))
                passages.append(f"{turn['role']}: {turn['content']}"[:MAX_CHARS])
                dates.append(_longmemeval_date(date))
        asked = _longmemeval_date(q["question_date"])
        question = Question(q["question"], q["question_type"], frozenset(evidence), asked, str(q["answer"]))
        corpora.append(Corpus(f"longmemeval {q['question_id']}", passages, [question], dates))
    return RetrievalSet("LongMemEval dev", corpora)


_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def _locomo_date(value: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" (no zone given: UTC)."""
    return datetime.strptime(value, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def locomo(path: Path = LOCOMO, limit: int | None = None, *, facts: bool = False) -> RetrievalSet:
    """`facts`: each conversation's `observation`s stored too, as facts citing the turns they name."""
    corpora = []
    for sample in json.loads(path.read_text())[: limit or None]:
        conversation = sample["conversation"]
        passages: list[str] = []
        index: dict[str, int] = {}
        dates: list[datetime] = []
        sessions = sorted((int(k.split("_")[1]), v) for k, v in conversation.items() if re.fullmatch(r"session_\d+", k))
        for number, turns in sessions:
            when = _locomo_date(conversation[f"session_{number}_date_time"])
            for turn in turns:
                index[turn["dia_id"]] = len(passages)
                passages.append(f"{turn['speaker']}: {turn['text']}")
                dates.append(when)
        corpus = Corpus(f"locomo {sample['sample_id']}{' with facts' if facts else ''}", passages, dates=dates)
        if facts:
            corpus.facts = _observations(sample, index)
        for qa in sample["qa"]:
            # evidence ids are sometimes written "D8:6; D9:17" or "D:11:26"
            ids = {f"D{s}:{t}" for e in qa.get("evidence", []) for s, t in _DIA_ID.findall(e)}
            evidence = frozenset(index[i] for i in ids if i in index)
            if qa["category"] in LOCOMO_CATEGORIES and evidence:
                category = LOCOMO_CATEGORIES[qa["category"]]
                corpus.questions.append(Question(qa["question"], category, evidence, answer=str(qa.get("answer", ""))))
        corpora.append(corpus)
    return RetrievalSet("LoCoMo dev with facts" if facts else "LoCoMo dev", corpora)


def _observations(sample: dict[str, Any], index: dict[str, int]) -> list[Fact]:
    """LoCoMo's facts per session and speaker ([text, "D1:3"]), dated by their session, citing the turns they name."""
    conversation, out = sample["conversation"], []
    for key, by_speaker in sample["observation"].items():
        number = int(key.split("_")[1])
        when = _locomo_date(conversation[f"session_{number}_date_time"])
        for facts in by_speaker.values():
            for text, named in facts:
                ids = {f"D{s}:{t}" for s, t in _DIA_ID.findall(json.dumps(named))}
                out.append(Fact(text, when, frozenset(index[i] for i in ids if i in index)))
    return out


def japanese(path: Path = JAPANESE, limit: int | None = None) -> RetrievalSet:
    data = json.loads(path.read_text())
    keys = list(data["facts"])
    corpus = Corpus("japanese", [data["facts"][k] for k in keys])
    for q in data["questions"]:
        corpus.questions.append(Question(q["question"], q["kind"], frozenset({keys.index(q["fact"])})))
    for text in data.get("unrelated", []):
        corpus.questions.append(Question(text, "unrelated", frozenset()))
    return RetrievalSet("Japanese", [corpus])


def one_agent(retrieval_set: RetrievalSet) -> RetrievalSet:
    """Every corpus of a set in one agent's memory: each question searches the others' turns too (a large agent:
    what the statement's row budgets, PROBE_ROWS and MAX_LEXICAL_MATCHES, may cost in ranking)."""
    passages: list[str] = []
    questions: list[Question] = []
    dates: list[datetime] = []
    for corpus in retrieval_set.corpora:
        offset = len(passages)
        questions += [replace(q, evidence=frozenset(offset + e for e in q.evidence)) for q in corpus.questions]
        passages += corpus.passages
        dates += corpus.dates or []
    merged = Corpus(f"{retrieval_set.name} in one agent", passages, questions, dates if len(dates) == len(passages) else None)
    return RetrievalSet(f"{retrieval_set.name}, one agent", [merged])


class Loader(Protocol):
    def __call__(self, *, limit: int | None = None) -> RetrievalSet: ...


SETS: dict[str, Loader] = {
    "longmemeval": longmemeval,
    "locomo": locomo,
    "locomo-facts": lambda limit=None: locomo(limit=limit, facts=True),
    "japanese": japanese,
    "longmemeval-one-agent": lambda limit=None: one_agent(longmemeval(limit=limit)),
}
DEFAULT_SETS = ["longmemeval", "locomo", "japanese"]
