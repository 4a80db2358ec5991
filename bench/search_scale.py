"""How archival search latency grows with the size of one agent's memory.

Agents of 1,000, 10,000 and 100,000 passages share one table (as agents do in production). Passages are synthetic:
random unit vectors, and 40 lexical tokens drawn from a Zipf law over a 20,000-word vocabulary whose 100 most
frequent words are left out (stop words never reach `search_text`). They are written with plain INSERTs (the
embedder is not what is measured here; bench/retrieval.py measures ingest). Each size is searched through
PassageRepository.hybrid_search, the code the service runs, with 30 random queries per mode (5 Zipf terms each),
after a warm-up. Printed: p50/p95 per mode and size, and the ratio to vector-only at the same size (same run).

    python bench/search_scale.py                   # sizes 1000 10000 100000: ~12 minutes on 2 cores (mostly HNSW inserts)
    python bench/search_scale.py --sizes 1000 5000
"""

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import db  # noqa: E402
from app.agents.models import Agent  # noqa: E402
from app.auth.models import DEFAULT_TENANT_ID  # noqa: E402
from app.memory.repository import PassageRepository  # noqa: E402
from bench.retrieval import start_database  # noqa: E402

DIM = 384
VOCABULARY = 20_000
SKIPPED_TOP_WORDS = 100
TOKENS_PER_PASSAGE = 40
TERMS_PER_QUERY = 5
QUERIES = 30
INSERT_BATCH = 2000
MODES = ("vector", "text", "hybrid")

rng = np.random.default_rng(0)
zipf = 1 / np.arange(SKIPPED_TOP_WORDS + 1, SKIPPED_TOP_WORDS + VOCABULARY + 1)
zipf /= zipf.sum()


def words(count: int) -> list[str]:
    return [f"w{i}" for i in rng.choice(VOCABULARY, size=count, p=zipf)]


def unit_vectors(count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


async def fill(sessions, size: int) -> uuid.UUID:
    async with db.transaction(sessions) as session:
        agent = Agent(tenant_id=DEFAULT_TENANT_ID, name=f"scale {size}")
        session.add(agent)
        await session.flush()
        agent_id = agent.id
    for start in range(0, size, INSERT_BATCH):
        count = min(INSERT_BATCH, size - start)
        rows = [
            {"id": uuid.uuid4(), "agent": agent_id, "text": " ".join(words(TOKENS_PER_PASSAGE)), "vector": str(v.tolist())}
            for v in unit_vectors(count)
        ]
        async with db.transaction(sessions) as session:
            await (await session.connection()).execute(
                text(
                    "INSERT INTO archival_passages (id, agent_id, content, search_text, embedding, embedding_model, tags, created_at) "
                    "VALUES (:id, :agent, :text, :text, CAST(:vector AS vector), 'synthetic', '{}', now())"
                ),
                rows,
            )
    return agent_id


async def timed_searches(sessions, agent_id: uuid.UUID, mode: str, queries: list[tuple[list[float], list[str]]]) -> list[float]:
    out = []
    for embedding, terms in queries:
        async with sessions() as session:
            started = time.perf_counter()
            await PassageRepository(session).hybrid_search(agent_id, embedding=embedding, terms=terms, k=10, mode=mode)
            out.append((time.perf_counter() - started) * 1000)
    return out


async def measure(url: str, sizes: list[int]) -> None:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    started = time.perf_counter()
    agents = {size: await fill(sessions, size) for size in sizes}
    async with db.transaction(sessions) as session:
        await (await session.connection()).execute(text("ANALYZE archival_passages"))
    print(f"Loaded {sum(sizes)} passages into {len(sizes)} agents in {time.perf_counter() - started:.0f}s\n", flush=True)
    queries = [(v.tolist(), list(dict.fromkeys(words(TERMS_PER_QUERY)))) for v in unit_vectors(QUERIES)]
    print(f"{'passages':>9} | {'mode':7} | {'p50 ms':>7} | {'p95 ms':>7} | p50 / vector p50")
    for size, agent_id in agents.items():
        p50 = {}
        for mode in MODES:
            await timed_searches(sessions, agent_id, mode, queries[:3])  # warm-up: plans, index pages
            latencies = sorted(await timed_searches(sessions, agent_id, mode, queries))
            p50[mode] = statistics.median(latencies)
            p95 = latencies[int(0.95 * (len(latencies) - 1))]
            print(f"{size:>9} | {mode:7} | {p50[mode]:7.1f} | {p95:7.1f} | {p50[mode] / p50['vector']:.2f}", flush=True)
    await engine.dispose()


def main(sizes: list[int]) -> None:
    server, url = start_database(Path(tempfile.mkdtemp(prefix="engram-scale-")), DIM)
    try:
        asyncio.run(measure(url, sizes))
    finally:
        server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    main(parser.parse_args().sizes)
