"""The sets of bench/recollection.py stored as their users would store them, through the API of the service in
process, and what each stored memory stands for: LoCoMo one archival passage per turn (with its facts, each citing
the turns it names: `locomo-facts`), LongMemEval handed in as dated conversations, the Japanese facts as passages."""

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import text

from app import db
from app.memory.kinds import Kind
from app.memory.recollection.candidate import Candidate
from app.memory.search import lexical
from bench import fusion_replica
from bench.retrieval_sets import Corpus, Question, RetrievalSet

CHUNK = 400


@dataclass
class Loaded:
    """One corpus as the service stored it."""

    corpus: Corpus
    agent_id: str
    kind: Kind
    turns: dict[uuid.UUID, set[int]] = field(default_factory=dict)  # memory id -> the corpus' turns it stands for
    facts: dict[uuid.UUID, str] = field(default_factory=dict)  # a fact's id -> its text (it stands for its sources)
    index: fusion_replica.Indexed | None = None  # the stored rows, for the RRF baseline
    rows: list[Candidate] = field(default_factory=list)  # index row -> the memory, as a recollection would show it

    def held(self, question: Question, shown: list[tuple[uuid.UUID, str]]) -> tuple[int, int]:
        """The evidence turns handed over, and those of them whose shown text keeps the answer's words (a turn shown by
        a fact and by itself counts once: kept if either keeps them)."""
        answer = set(lexical.tokens(question.answer))
        held: set[int] = set()
        kept: set[int] = set()
        for memory, what in shown:
            for turn in self.turns.get(memory, set()) & question.evidence:
                in_turn = answer.intersection(lexical.tokens(self.corpus.passages[turn]))
                held.add(turn)
                if 2 * len(in_turn.intersection(lexical.tokens(what))) >= len(in_turn):
                    kept.add(turn)
        return len(held), len(kept)


def store(client: TestClient, s: RetrievalSet, corpus: Corpus) -> Loaded:
    agent = client.post("/v1/agents", json={"name": f"bench {corpus.name}"}).json()["id"]
    handed = s.name.startswith("LongMemEval")
    loaded = Loaded(corpus, agent, "recall" if handed else "archival")
    dates: Sequence[datetime | None] = corpus.dates or [None] * len(corpus.passages)
    for start in range(0, len(corpus.passages), CHUNK):
        items = []
        for passage, when in zip(corpus.passages[start : start + CHUNK], dates[start : start + CHUNK], strict=True):
            role, said = passage.split(": ", 1) if handed else ("", passage)
            said = said if said.strip() else "…"  # a handed-in message has text
            item = {"role": role, "content": said} if handed else {"content": passage}
            items.append(item | ({"occurred_at": when.isoformat()} if when else {}))
        if handed:
            response = client.post(f"/v1/agents/{agent}/messages", json={"messages": items})
            ids = response.json()["message_ids"]
        else:
            response = client.post(f"/v1/agents/{agent}/archival/batch", json={"items": items})
            ids = [p["id"] for p in response.json()["items"]]
        assert response.status_code == 201, response.text
        for offset, memory in enumerate(ids):
            loaded.turns.setdefault(uuid.UUID(memory), set()).add(start + offset)
    if corpus.facts:
        store_facts(client, loaded)
    return loaded


def store_facts(client: TestClient, loaded: Loaded) -> None:
    """The corpus' facts as passages citing the turns they name (what a memory pass that cites would store): each
    counts for its sources."""
    memory_of = {turn: memory for memory, turns in loaded.turns.items() for turn in turns}
    facts = loaded.corpus.facts
    for start in range(0, len(facts), CHUNK):
        chunk = facts[start : start + CHUNK]
        items = [
            {"content": f.text, "occurred_at": f.date.isoformat(), "sources": sorted({str(memory_of[t]) for t in f.sources})}
            for f in chunk
        ]
        response = client.post(f"/v1/agents/{loaded.agent_id}/archival/batch", json={"items": items})
        assert response.status_code == 201, response.text
        for fact, stored in zip(chunk, response.json()["items"], strict=True):
            memory = uuid.UUID(stored["id"])
            loaded.turns.setdefault(memory, set()).update(fact.sources)
            loaded.facts[memory] = fact.text


async def read_back(url: str, loaded: list[Loaded]) -> None:
    """Each corpus' stored rows and vectors, the RRF baseline's input."""
    engine = db.create_engine(url)
    try:
        async with engine.connect() as conn:
            for one in loaded:
                table, who = ("messages", "role") if one.kind == "recall" else ("archival_passages", "NULL")
                rows = (
                    await conn.execute(
                        text(
                            f"SELECT id, content, embedding::text, occurred_at, {who} FROM {table} "
                            "WHERE agent_id = :a AND embedding IS NOT NULL ORDER BY occurred_at, id"
                        ),
                        {"a": uuid.UUID(one.agent_id)},
                    )
                ).all()
                vectors = np.stack([np.asarray(json.loads(r[2]), dtype=np.float32) for r in rows])
                dates = np.array([r[3].replace(tzinfo=None) for r in rows], dtype="datetime64[us]")
                one.index = fusion_replica.Indexed([r[1] for r in rows], vectors, dates)
                one.rows = [Candidate(one.kind, r[0], r[1], r[3], 0, 0, 0, 0, speaker=r[4]) for r in rows]
    finally:
        await engine.dispose()
