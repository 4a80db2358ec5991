"""A query's baselines, from cohorts of fixed texts that concern no user.

- Similarity: its mean cosine to a cohort of generic passages. Embedders give every query a baseline similarity to
  everything; multilingual-e5 puts unrelated texts at 0.75-0.85, and that baseline moves from query to query.
  Subtracting the query's similarity to the centroid of the generic passages (cohort normalisation, as in T-norm
  score normalisation) turns a cosine into a margin over that baseline, which separates relevant from unrelated
  memories far better than the raw cosine.
- Personal: how much more the query is like questions about the asker's own life ("When is my appointment?") than
  like questions of general knowledge ("Who invented the telephone?"), its mean cosine to each cohort (as queries).
  Memory answers the first kind; recollection asks less of a personal question's margin
  (app/memory/recollection/gate.py).
- Scale: what the model's cosine differences are multiplied by to read on multilingual-e5-small's scale, on which
  every threshold on them was chosen: e5's room between unrelated texts' cosine and an identical text's over the
  model's own.

The cohorts share no topic with the evaluation sets' unrelated questions."""

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from app.llm.embeddings import Embedder

GENERIC_PASSAGES = (
    "The meeting was moved to the third floor conference room.",
    "Photosynthesis converts light into chemical energy.",
    "The train to the airport leaves every fifteen minutes.",
    "Add salt and pepper, then simmer for ten minutes.",
    "The stock market closed slightly higher today.",
    "Please restart the router if the connection drops.",
    "The museum is closed on Mondays.",
    "He scored twice in the second half.",
    "The package will arrive on Friday.",
    "Remember to water the plants while I'm away.",
    "The software update fixes several security issues.",
    "It rained all afternoon, so we stayed inside.",
    "The library has a new section for children's books.",
    "She finished the marathon in under four hours.",
    "The contract must be signed by both parties.",
    "今日は朝から雨が降っています。",
    "会議は三階の会議室に変更になりました。",
    "この料理は塩と胡椒で味を調えます。",
    "電車は十五分ごとに出発します。",
    "博物館は月曜日が休館日です。",
    "荷物は金曜日に届く予定です。",
    "ソフトウェアの更新でいくつかの不具合が直りました。",
    "彼は後半に二点を決めました。",
    "図書館に新しい児童書のコーナーができました。",
    "契約書には双方の署名が必要です。",
    "週末は混雑が予想されます。",
    "新しいスマートフォンが発表されました。",
    "山の上は気温がかなり低いです。",
    "この道は夜になると暗くなります。",
    "駅の近くに新しいパン屋ができました。",
)

PERSONAL_QUESTIONS = (
    "What did I tell you about my family?",
    "When is my appointment?",
    "Do you remember what I like?",
    "What was the name of my pet?",
    "Where do I work now?",
    "What did we talk about last time?",
    "How is my project going?",
    "What did I say I would do this weekend?",
    "私の家族について何を話したっけ？",
    "僕の予定はいつだった？",
    "前に話したこと覚えてる？",
    "うちの犬の名前は？",
    "私はどこで働いている？",
    "この前何の話をしたっけ？",
    "週末は何をするって言ってた？",
    "朝ごはんは何を食べることが多い？",
    "寝るのは何時ごろ？",
    "休みの日はどう過ごしてる？",
    "好きな季節は？",
    "使っているスマホの機種は？",
)
GENERAL_QUESTIONS = (
    "What is the population of Canada?",
    "Explain how an electric motor works.",
    "Who invented the telephone?",
    "What is the chemical formula of table salt?",
    "How does a car engine work?",
    "Translate 'good morning' into French.",
    "What is the speed of light?",
    "Who was the first president of the United States?",
    "カナダの人口は？",
    "電気はどうやって作られるの？",
    "電話を発明したのは誰？",
    "食塩の化学式は？",
    "光の速さはどれくらい？",
    "アメリカの初代大統領は誰？",
    "英語で「おはよう」は何と言う？",
    "一年は何日ある？",
    "酸素の元素記号は？",
    "世界で一番大きい海は？",
    "ピラミッドを作ったのは誰？",
    "円の面積の求め方は？",
)

# The thresholds on margins (recollection's gate, related memories) were chosen with multilingual-e5-small, whose
# general questions sit at a mean cosine of 0.727 to the generic passages: 0.273 of room below an identical text.
# Models spread their cosines differently (wordllama's static vectors put the same pairs at 0.155), so a fixed margin
# would let nearly everything through (wordllama on LoCoMo: 84 of 90 off-topic messages against e5's 16) or nothing.
# A model's margins are read on e5's scale: multiplied by REFERENCE_ROOM over the model's own room. Of the cohort
# statistics tried (the room, the spread of the unrelated cosines, per query and overall), the room alone kept e5's
# evidence at the same threshold.
REFERENCE_ROOM = 0.272663  # e5's (1 - 0.727337), so that e5's margins are read as they are
# A model with less room than this scores every text alike (a degenerate or test model): its scale cannot be read,
# and its margins are taken as they are.
MIN_ROOM = 0.05

_centroids: dict[tuple[str, int], np.ndarray] = {}
_personal_means: dict[tuple[str, int], np.ndarray] = {}
_general_means: dict[tuple[str, int], np.ndarray] = {}
# A lock per event loop: an asyncio.Lock is bound to the first loop that contends for it, and one process may run
# services on several loops in turn (tests, the CLI).
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Baseline:
    """A query's baselines: `similarity` a cosine of the model's own, `personal` and `margin` on the reference scale."""

    similarity: float  # its mean cosine to the generic passages
    scale: float  # what this model's cosine differences are multiplied by to read on the reference model's scale
    personal: float  # how much more it is like a question about the asker's own life than one of general knowledge

    def margin(self, similarity: float) -> float:
        """How far a cosine stands above the query's baseline, on the reference scale."""
        return (similarity - self.similarity) * self.scale


async def _once(
    store: dict[tuple[str, int], np.ndarray], embedder: Embedder, compute: Callable[[], Awaitable[np.ndarray]]
) -> np.ndarray:
    """`compute()`'s vector, computed once per embedder model (whichever event loop asks first)."""
    key = (embedder.model, embedder.dim)
    if key not in store:
        async with _locks.setdefault(asyncio.get_running_loop(), asyncio.Lock()):
            if key not in store:
                store[key] = await compute()
    return store[key]


def _mean(vectors: list[list[float]]) -> np.ndarray:
    mean: np.ndarray = np.asarray(vectors, dtype=np.float32).mean(axis=0)
    return mean


async def centroid(embedder: Embedder) -> np.ndarray:
    """The mean embedding of the generic passages, once per embedder model."""

    async def compute() -> np.ndarray:
        return _mean(await embedder.embed_passages(list(GENERIC_PASSAGES)))

    return await _once(_centroids, embedder, compute)


async def _question_mean(store: dict[tuple[str, int], np.ndarray], embedder: Embedder, questions: tuple[str, ...]) -> np.ndarray:
    async def compute() -> np.ndarray:
        if embedder.symmetric:  # a query's vector is its passage vector: one request to an endpoint, not one each
            return _mean(await embedder.embed_passages(list(questions)))
        return _mean([await embedder.embed_query(q) for q in questions])

    return await _once(store, embedder, compute)


def cohorts_embedded(embedder: Embedder) -> bool:
    """Whether `baseline` can answer without asking the embedder (the cohorts of this model are embedded)."""
    key = (embedder.model, embedder.dim)
    return all(key in store for store in (_centroids, _personal_means, _general_means))


async def embed_cohorts(embedder: Embedder) -> None:
    """Embed the cohorts (once per embedder model): `baseline` then asks nothing of the embedder."""
    await centroid(embedder)
    await _question_mean(_personal_means, embedder, PERSONAL_QUESTIONS)
    await _question_mean(_general_means, embedder, GENERAL_QUESTIONS)


async def baseline(embedder: Embedder, query_vector: list[float]) -> Baseline:
    """The query's baselines: its mean cosine to the generic passages; how much more it is like the personal
    questions than the general ones (its mean cosine to the first cohort less its mean cosine to the second), on the
    reference scale; and that scale, from the room between the general questions' mean cosine to the generic
    passages and an identical text's."""
    centre = await centroid(embedder)
    personal = await _question_mean(_personal_means, embedder, PERSONAL_QUESTIONS)
    general = await _question_mean(_general_means, embedder, GENERAL_QUESTIONS)
    room = 1.0 - float(np.dot(general, centre))
    scale = REFERENCE_ROOM / room if room >= MIN_ROOM else 1.0
    query = np.asarray(query_vector, dtype=np.float32)
    return Baseline(float(np.dot(centre, query)), scale, float(np.dot(personal - general, query)) * scale)
