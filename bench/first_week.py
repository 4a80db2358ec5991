"""Recollection on small personal stores, a user's first weeks (tests/data/first_week.json): many stores of 1 to 50
memories (messages handed in, first person, and third-person facts), English, Japanese and mixed, dated; questions
about the user, paraphrases, questions about a time (read from the store's `now`, sent as `as_of`), questions across
languages, and off-topic messages that no memory of their store bears on.

Each store goes into its own agent through the API (`POST …/messages` for messages, `POST …/archival/batch` for
facts); each question and off-topic message asks `POST …/recollection` (1,500 characters, `as_of` the store's now).
Per split (dev, held-out), language and kind of question: `answered`, the share of questions with some evidence
handed over; `all`, with every evidence memory; `noise`, the memories per question that hold nothing asked for;
off-topic messages given any memory.

    python -m bench.first_week [--split dev heldout] [--cache DIR]
"""

import argparse
import json
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.llm.embeddings import Embedder, build_embedder
from app.main import create_app
from app.settings import Settings
from bench.embedding_cache import CachedEmbedder
from bench.retrieval import start_database

FIRST_WEEK = Path(__file__).resolve().parent.parent / "tests" / "data" / "first_week.json"
BUDGET = 1500


@dataclass
class Store:
    name: str
    split: str
    language: str
    now: str
    memories: list[dict[str, Any]]
    questions: list[dict[str, Any]]
    off_topic: list[str]
    related: list[dict[str, Any]]
    agent_id: str = ""
    ids: dict[str, str] = field(default_factory=dict)  # the memory's id in the set -> its id in Engram


def stores(path: Path = FIRST_WEEK, splits: Iterable[str] = ("dev", "heldout")) -> list[Store]:
    wanted = set(splits)
    return [
        Store(s["name"], s["split"], s["language"], s["now"], s["memories"], s["questions"], s["off_topic"], s["related"])
        for s in json.loads(path.read_text())["stores"]
        if s["split"] in wanted
    ]


def load(client: TestClient, store: Store) -> None:
    """The store in a new agent: its messages handed in, its facts as archival passages."""
    response = client.post("/v1/agents", json={"name": f"first week {store.name} {store.split}"})
    assert response.status_code == 201, response.text
    store.agent_id = response.json()["id"]
    messages = [m for m in store.memories if m["type"] == "message"]
    facts = [m for m in store.memories if m["type"] == "fact"]
    if messages:
        body = {"messages": [{"role": m["role"], "content": m["content"], "occurred_at": m["occurred_at"]} for m in messages]}
        response = client.post(f"/v1/agents/{store.agent_id}/messages", json=body)
        assert response.status_code == 201, response.text
        store.ids |= {m["id"]: i for m, i in zip(messages, response.json()["message_ids"], strict=True)}
    if facts:
        body = {"items": [{"content": f["content"], "occurred_at": f["occurred_at"]} for f in facts]}
        response = client.post(f"/v1/agents/{store.agent_id}/archival/batch", json=body)
        assert response.status_code == 201, response.text
        store.ids |= {f["id"]: p["id"] for f, p in zip(facts, response.json()["items"], strict=True)}


def recollect(client: TestClient, store: Store, message: str, budget: int = BUDGET) -> list[str]:
    """The ids (the set's) of the memories handed over for `message`, asked at the store's now."""
    body = {"query": message, "max_chars": budget, "as_of": store.now, "include_core": False}
    response = client.post(f"/v1/agents/{store.agent_id}/recollection", json=body)
    assert response.status_code == 200, response.text
    engram_to_set = {v: k for k, v in store.ids.items()}
    return [engram_to_set[m["id"]] for m in response.json()["memories"]]


@dataclass
class Tally:
    answered: list[bool] = field(default_factory=list)
    whole: list[bool] = field(default_factory=list)
    noise: list[int] = field(default_factory=list)
    off_topic: list[bool] = field(default_factory=list)
    related: list[tuple[bool, bool]] = field(default_factory=list)  # (given any memory, given one it bears on)

    def question(self, evidence: set[str], given: list[str]) -> None:
        self.answered.append(bool(evidence & set(given)))
        self.whole.append(evidence <= set(given))
        self.noise.append(len(set(given) - evidence))

    def __str__(self) -> str:
        parts = []
        if self.answered:
            n = len(self.answered)
            parts.append(
                f"answered {sum(self.answered) / n:.3f} ({sum(self.answered)}/{n}) all {sum(self.whole) / n:.3f} "
                f"noise {sum(self.noise) / n:.2f}"
            )
        if self.off_topic:
            parts.append(f"off-topic given {sum(self.off_topic)}/{len(self.off_topic)}")
        if self.related:
            given, bearing = sum(g for g, _ in self.related), sum(b for _, b in self.related)
            parts.append(f"related given {given}/{len(self.related)} (one it bears on {bearing})")
        return "  ".join(parts)


def measure(client: TestClient, chosen: list[Store], budget: int = BUDGET, verbose: bool = False) -> dict[str, Tally]:
    """The tallies by row: `<split>`, `<split> <language>`, `<split> kind <kind>`, `<split> size <band>`."""
    tallies: dict[str, Tally] = defaultdict(Tally)
    for store in chosen:
        if not store.agent_id:
            load(client, store)
        band = "1-5" if len(store.memories) <= 5 else "6-15" if len(store.memories) <= 15 else "16-50"
        rows = (store.split, f"{store.split} {store.language}", f"{store.split} size {band}")
        for q in store.questions:
            given = recollect(client, store, q["text"], budget)
            evidence = set(q["evidence"])
            for row in (*rows, f"{store.split} kind {q['kind']}"):
                tallies[row].question(evidence, given)
            if verbose and (not evidence & set(given) or set(given) - evidence):
                print(f"  {store.name}: {q['text']!r} evidence {sorted(evidence)} given {given}")
        for message in store.off_topic:
            given = recollect(client, store, message, budget)
            for row in rows:
                tallies[row].off_topic.append(bool(given))
            if verbose and given:
                print(f"  {store.name}: off-topic {message!r} given {given}")
        for related in store.related:
            given = recollect(client, store, related["text"], budget)
            for row in rows:
                tallies[row].related.append((bool(given), bool(set(given) & set(related["bears_on"]))))
    return dict(tallies)


def report(tallies: dict[str, Tally]) -> None:
    for row in sorted(tallies):
        print(f"{row:<28} {tallies[row]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", nargs="+", default=["dev", "heldout"], choices=["dev", "heldout"])
    parser.add_argument("--cache", type=Path, help="embeddings kept across runs (bench/embedding_cache.py)")
    parser.add_argument("--budget", type=int, default=BUDGET)
    parser.add_argument("--data", type=Path, default=FIRST_WEEK, help="the set (tests/data/first_week.json's shape)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every miss and every memory given in excess")
    args = parser.parse_args()
    embedder: Embedder = build_embedder(Settings())
    if args.cache:
        embedder = CachedEmbedder(embedder, args.cache)
    root = Path(tempfile.mkdtemp(prefix="engram-first-week-"))
    server, url = start_database(root, embedder.dim)
    try:
        with TestClient(create_app(Settings(database_url=url), embedder=embedder), client=("127.0.0.1", 50000)) as client:
            report(measure(client, stores(args.data, args.split), args.budget, args.verbose))
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
