"""Calibration of RELATED_MIN_MARGIN (app/memory/archival/timeline.py): which stored passages `archival_memory_create`
shows the model as "possibly about the same thing", so that it can supersede one.

Pairs of an older fact and the newer one that replaces it (English, Japanese, and across the two), and every other
pairing of a newer fact with an older one as the different-topic pairs (facts about the same user, so a close
negative: "lives in Tokyo" against "favourite food is ramen"). For each pair: the raw cosine of the two passage
vectors, and the margin over the new passage's baseline (its cosine to the centroid of generic text, as automatic
recollection uses: app/memory/search/baseline.py; e5's margins are on the reference scale as they are). Prints both
distributions and how many of each a threshold keeps:

    python -m bench.related_passages
"""

import asyncio

import numpy as np

from app.llm.embeddings.providers import E5Embedder
from app.memory.search.baseline import centroid
from app.settings import available_cpus

# (topic, older fact, the newer fact that replaces it); pairs of one topic are same-topic across languages too.
SAME_TOPIC = [
    ("home", "The user lives in Tokyo.", "The user moved from Tokyo to Osaka."),
    ("food", "The user's favourite food is ramen.", "These days the user prefers sushi."),
    (
        "job",
        "The user works as a nurse at Tokyo General Hospital.",
        "The user left nursing and now works as a software engineer.",
    ),
    ("meeting", "The meeting with Kenji is on Monday at 10.", "The meeting with Kenji was moved to Thursday."),
    ("dog", "The user's dog is called Pochi.", "Pochi, the user's dog, died in March."),
    ("car", "The user drives a Toyota Prius.", "The user sold the Prius and bought a Tesla."),
    ("language", "The user is learning Spanish.", "The user switched from Spanish to Italian lessons."),
    ("sister", "The user's sister Aiko lives in Kyoto.", "Aiko moved to Sapporo for a new job."),
    ("trip", "The user plans a trip to Paris in May.", "The Paris trip is cancelled."),
    ("home", "ユーザーは東京に住んでいる。", "ユーザーは大阪に引っ越した。"),
    ("food", "好きな食べ物はラーメン。", "最近は寿司のほうが好き。"),
    ("meeting", "会議は月曜日の10時から。", "会議は木曜日に変更になった。"),
    ("job", "ユーザーは看護師として働いている。", "ユーザーはエンジニアに転職した。"),
    ("dog", "ユーザーの犬の名前はポチ。", "ポチは三月に亡くなった。"),
    ("home", "The user lives in Tokyo.", "ユーザーは大阪に引っ越した。"),
    ("food", "好きな食べ物はラーメン。", "The user now prefers sushi to ramen."),
]
THRESHOLDS = (0.04, 0.05, 0.06, 0.07, 0.08, 0.10, 0.12)


def describe(name: str, values: np.ndarray) -> str:
    q = np.percentile(values, [0, 5, 50, 95, 100])
    return f"{name}: n={len(values)} min {q[0]:.3f}  p5 {q[1]:.3f}  median {q[2]:.3f}  p95 {q[3]:.3f}  max {q[4]:.3f}"


def report(title: str, margin: np.ndarray, same: np.ndarray, news: list[str]) -> None:
    print(f"== {title}")
    print("  " + describe("same topic     ", margin[same]))
    print("  " + describe("different topic", margin[~same]))
    print("  threshold: same-topic pairs kept, different-topic pairs kept; new facts whose older fact is listed, listing another")
    for t in THRESHOLDS:
        listed = sum(bool((margin[i][same[i]] >= t).any()) for i in range(len(news)))
        wrong = sum(bool((margin[i][~same[i]] >= t).any()) for i in range(len(news)))
        print(
            f"  {t:.2f}: {int((margin[same] >= t).sum())}/{int(same.sum())}  {int((margin[~same] >= t).sum())}/"
            f"{int((~same).sum())};  {listed}/{len(news)}  {wrong}/{len(news)}"
        )


async def main() -> None:
    embedder = E5Embedder(available_cpus())
    topics = [topic for topic, _, _ in SAME_TOPIC]
    olds = [old for _, old, _ in SAME_TOPIC]
    news = [new for _, _, new in SAME_TOPIC]
    generic = await centroid(embedder)
    old_vectors = np.asarray(await embedder.embed_passages(olds), dtype=np.float32)
    same = np.array([[topics[j] == topics[i] for j in range(len(olds))] for i in range(len(news))])
    as_passages = np.asarray(await embedder.embed_passages(news), dtype=np.float32)
    as_queries = np.asarray([await embedder.embed_query(new) for new in news], dtype=np.float32)
    for title, vectors in (
        ("new fact embedded as a passage", as_passages),
        ("new fact embedded as a query (shipped)", as_queries),
    ):
        print(
            f"raw cosine, {title}: same-topic min {(vectors @ old_vectors.T)[same].min():.3f}, different-topic max "
            f"{(vectors @ old_vectors.T)[~same].max():.3f}"
        )
        report(f"margin over baseline, {title}", vectors @ old_vectors.T - (vectors @ generic)[:, None], same, news)


if __name__ == "__main__":
    asyncio.run(main())
