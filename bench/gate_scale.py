"""Whether the recollection gate's thresholds hold for an embedder other than the one they were chosen with
(multilingual-e5-small; app/memory/search/baseline.py, REFERENCE_ROOM). For each model, the share of LoCoMo dev's and
the Japanese set's questions whose best evidence turn clears the gate's bar on margin alone, and the share of
off-topic messages (the Japanese set's 15 unrelated questions and tests/data/off_topic_heldout.json's 20) whose best
hit in each store (every LoCoMo conversation, the Japanese facts) clears it. Margins are read on the model's own scale
(`own`: the fixed thresholds applied to its raw cosine differences) and on the reference scale (`scaled`, as the
service reads them). Models: e5 (the reference), e5 with every cosine moved halfway to 1 (testkit.embedders.Compressed:
`scaled` must read as e5), and, with the bench extra installed, wordllama's static vectors, shipped in its wheel: a
model that spreads its cosines widely, as OpenAI's do.

    python -m bench.gate_scale --cache ~/.cache/engram-bench
"""

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.llm.embeddings import Embedder
from app.llm.embeddings.providers import E5Embedder
from app.memory.recollection.gate import min_margin
from app.memory.search.baseline import Baseline, baseline
from app.settings import available_cpus
from bench.embedding_cache import CachedEmbedder
from bench.retrieval_sets import JAPANESE, ROOT, Corpus, japanese, locomo
from testkit.embedders import Compressed

OFF_TOPIC = ROOT / "tests" / "data" / "off_topic_heldout.json"


class WordLlama:
    """wordllama's bundled l2_supercat vectors (256 dims, symmetric). Its loader looks for the bundled tokenizer under
    `tokenizer/` while the wheel ships it under `tokenizers/` (0.4.0), where it looks in a cache folder: the package's
    own folder is given as the cache, and nothing is downloaded."""

    model, dim, symmetric = "wordllama-l2-supercat", 256, True

    def __init__(self) -> None:
        import wordllama

        self.vectors = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in v] for v in self.vectors.embed(list(texts), norm=True)]

    async def embed_query(self, text: str) -> list[float]:
        return (await self.embed_passages([text]))[0]


def bar(base: Baseline, scaled: bool, compared: int) -> float:
    """The gate's bar for a query compared with `compared` memories (app/memory/recollection/gate.py, min_margin):
    less margin for a question about the asker's own life."""
    return min_margin(compared, base.personal if scaled else base.personal / base.scale)


async def passes(embedder: Embedder, stores: list[Corpus], off_topic: list[str]) -> dict[str, tuple[float, float, int]]:
    """For `own` and `scaled`: the share of questions whose best evidence turn clears the bar, and the share (and
    count) of (off-topic message, store) pairs whose best hit clears it."""
    evidence: dict[str, list[bool]] = {"own": [], "scaled": []}
    stray: dict[str, list[bool]] = {"own": [], "scaled": []}
    for corpus in stores:
        passages = np.asarray(await embedder.embed_passages(corpus.passages), dtype=np.float32)
        asked = [(q.text, sorted(q.evidence)) for q in corpus.questions if q.evidence] + [(t, []) for t in off_topic]
        for text, gold in asked:
            vector = await embedder.embed_query(text)
            base = await baseline(embedder, vector)
            similarities = passages @ np.asarray(vector, dtype=np.float32)
            best = float(similarities[gold].max() if gold else similarities.max())
            for name, margin in (("own", best - base.similarity), ("scaled", base.margin(best))):
                (evidence if gold else stray)[name].append(margin >= bar(base, name == "scaled", len(corpus.passages)))
    return {name: (float(np.mean(evidence[name])), float(np.mean(stray[name])), sum(stray[name])) for name in evidence}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="embedding cache folder (bench/embedding_cache.py)")
    args = parser.parse_args()
    e5: Embedder = E5Embedder(available_cpus())
    if args.cache:
        e5 = CachedEmbedder(e5, args.cache)
    models: list[Embedder] = [e5, Compressed(e5)]
    try:
        models.append(WordLlama())
    except ImportError:
        print("wordllama is not installed (pip install -e '.[bench]'): e5 and its compressed copy only")
    stores = [*locomo().corpora, *japanese().corpora]
    for store in stores:  # the Japanese set's unrelated questions are asked as off-topic messages below
        store.questions = [q for q in store.questions if q.evidence]
    unrelated = json.loads(JAPANESE.read_text())["unrelated"] + json.loads(OFF_TOPIC.read_text())["unrelated"]
    print(
        f"{sum(len(s.questions) for s in stores)} questions with evidence; {len(unrelated)} off-topic messages x {len(stores)} stores"
    )
    print(f"{'model':36} {'margins':7} {'evidence passes':>16} {'off-topic passes':>22}")
    for model in models:
        for name, (kept, stray, count) in (await passes(model, stores, unrelated)).items():
            print(f"{model.model:36} {name:7} {kept:16.3f} {stray:10.3f} ({count:3d}/{len(unrelated) * len(stores)})")
    if isinstance(e5, CachedEmbedder):
        e5.save()


if __name__ == "__main__":
    asyncio.run(main())
