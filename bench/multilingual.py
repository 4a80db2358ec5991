"""Japanese and cross-lingual memory through the service's search: the set of tests/data/multilingual_memory.json
(40 facts one user told an agent, 44 questions in other words) stored in one agent with ArchivalMemory.add() and
asked with ArchivalMemory.search(k=3) in hybrid and vector mode. Prints top-1 / top-3 hit rates per kind of
question, for whichever embedder the environment configures (the default: multilingual-e5-small):

    python -m bench.multilingual
    ENGRAM_EMBEDDING_PROVIDER=sentence-transformers ENGRAM_EMBEDDING_MODEL=<folder> python -m bench.multilingual
"""

import asyncio
import json
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from app import db
from app.agents.models import Agent
from app.auth.models import DEFAULT_TENANT_ID
from app.llm.embeddings import Embedder, build_embedder
from app.memory.archival.service import ArchivalMemory, NewPassage
from app.memory.search.query import Mode, SearchQuery
from app.settings import Settings
from bench.retrieval import start_database

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "multilingual_memory.json"
MODES: tuple[Mode, ...] = ("hybrid", "vector")


async def ranks(url: str, embedder: Embedder, data: dict[str, Any]) -> dict[str, dict[str, list[int | None]]]:
    """Per mode and kind of question: the rank of the right fact in the top 3 (None: not there)."""
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    out: dict[str, dict[str, list[int | None]]] = {mode: defaultdict(list) for mode in MODES}
    try:
        async with db.transaction(sessions) as session:
            agent = Agent(tenant_id=DEFAULT_TENANT_ID, name="multilingual bench")
            session.add(agent)
            await session.flush()
            keys = list(data["facts"])
            stored = await ArchivalMemory(session, embedder).add(agent.id, [NewPassage(content=data["facts"][k]) for k in keys])
            fact_of = {s.passage.id: key for s, key in zip(stored, keys, strict=True)}
        for mode in MODES:
            for q in data["questions"]:
                async with sessions() as session:
                    query = SearchQuery(q["question"], k=3, mode=mode)
                    matches = await ArchivalMemory(session, embedder).search(agent.id, query)
                found = [fact_of[p.id] for p, _ in matches]
                out[mode][q["kind"]].append(found.index(q["fact"]) if q["fact"] in found else None)
    finally:
        await engine.dispose()
    return out


def main() -> None:
    data = json.loads(SET.read_text())
    embedder = build_embedder(Settings())
    root = Path(tempfile.mkdtemp(prefix="engram-multilingual-"))
    server, url = start_database(root, embedder.dim)
    try:
        results = asyncio.run(ranks(url, embedder, data))
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    print(f"Embedder: {embedder.model} ({embedder.dim} dims); {len(data['facts'])} facts, {len(data['questions'])} questions")
    print(f"{'mode':<7} | {'kind':<6} | {'n':>3} | {'top-1':>5} | {'top-3':>5}")
    for mode, kinds in results.items():
        for kind, found in [*kinds.items(), ("all", [r for rs in kinds.values() for r in rs])]:
            top1 = sum(r == 0 for r in found) / len(found)
            top3 = sum(r is not None for r in found) / len(found)
            print(f"{mode:<7} | {kind:<6} | {len(found):>3} | {top1:5.2f} | {top3:5.2f}")


if __name__ == "__main__":
    main()
