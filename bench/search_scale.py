"""How archival search latency grows with the size of one agent's memory, and with the number of agents sharing
the table.

Two layouts, each in a fresh embedded PostgreSQL:
- one agent each of `--sizes` passages (default 1,000, 10,000, 100,000), side by side in one table;
- `--agents` agents of `--per-agent` passages each (e.g. 1,000 x 1,000 = 1M rows), as a real deployment looks.
Passages are synthetic: unit vectors clustered around 1,000 topics (--uniform: uniform on the sphere, a worst
case for any approximate index), and 40 lexical tokens drawn from a Zipf law over a 20,000-word
vocabulary whose 100 most frequent words are left out (stop words never reach `search_text`). They are written
with multi-row INSERTs; then the agents large enough get their own HNSW index (agent_indexes.maintain_once, what the
service runs in the background; build time and size printed); the embedder is not what is measured here (bench/ingest.py measures ingest). Searches go through
PassageRepository.hybrid_search, the code the service runs, query embedding excluded: 30 random queries per mode
(5 Zipf terms each) after a warm-up. Printed: p50/p95 per mode (the vector leg also at hnsw.ef_search 40, 100, 200),
EXPLAIN ANALYZE of one hybrid search per agent (planning, execution, the costliest plan nodes), and the overlap of the vector leg's top 10 with the
exact top 10 (numpy over the same vectors). Then, when some agents of the crowd were not searched, what keeping
the table costs (bench/table_upkeep.py): the size on disk, inserts as the service makes them, VACUUM after deletes.

--before-after loads one table (migration 0014), measures, upgrades it to tables partitioned by agent (0015, timed)
and measures again with the same queries on the same agents.

    python -m bench.search_scale                                    # ~15 minutes on 2 cores
    python -m bench.search_scale --sizes 1000 5000 --agents 0
    python -m bench.search_scale --sizes --agents 1000 --per-agent 1000
    python -m bench.search_scale --sizes 100000 50000 50000 --agents 1997 --per-agent 900 --before-after   # 2M rows
"""

import argparse
import asyncio
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app import db
from app.agents.models import Agent
from app.auth.models import DEFAULT_TENANT_ID
from app.memory.archival.repository import PassageRepository
from app.memory.kinds import TABLES
from app.memory.models import ArchivalPassage
from app.memory.search import agent_indexes
from app.memory.search.hybrid import search_statement
from app.memory.search.query import Mode, SearchQuery
from bench import table_upkeep
from bench.explain import explain
from bench.retrieval import start_database

DIM = 384
VOCABULARY = 20_000
SKIPPED_TOP_WORDS = 100
TOKENS_PER_PASSAGE = 40
TERMS_PER_QUERY = 5
QUERIES = 30
INSERT_BATCH = 2000
MODES: tuple[Mode, ...] = ("vector", "text", "hybrid")
TOPICS = 1000
UNIFORM = "--uniform" in sys.argv
EF_SEARCH = (40, 100, 200)  # vector leg only: pgvector's default, and higher
SINGLE_INSERTS = 300
ONE_TABLE = "0014_unique_agent_names"  # the last revision before the tables were partitioned by agent

rng = np.random.default_rng(0)
zipf = 1 / np.arange(SKIPPED_TOP_WORDS + 1, SKIPPED_TOP_WORDS + VOCABULARY + 1)
zipf /= zipf.sum()


def words(count: int) -> list[str]:
    return [f"w{i}" for i in rng.choice(VOCABULARY, size=count, p=zipf)]


def texts(count: int) -> list[str]:
    """`count` synthetic passages, drawn in one go (per-passage draws made loading 1M rows take half an hour)."""
    draws = rng.choice(VOCABULARY, size=(count, TOKENS_PER_PASSAGE), p=zipf)
    return [" ".join(f"w{i}" for i in row) for row in draws]


def _normalised(vectors: np.ndarray) -> np.ndarray:
    normalised: np.ndarray = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    return normalised


CENTRES = _normalised(rng.standard_normal((TOPICS, DIM)))
SPREAD = 0.7  # norm of the noise around a topic's centre: cosine ~0.8 to the centre, ~0.67 within a topic


def unit_vectors(count: int) -> np.ndarray:
    """Clustered like real embeddings (topics), or uniform on the sphere with --uniform: there every vector is
    nearly orthogonal to every other, nearest neighbours are barely nearer than the rest, and any approximate
    index (HNSW included) finds them poorly — a worst case rather than what an embedder produces."""
    noise = rng.standard_normal((count, DIM)).astype(np.float32)
    if UNIFORM:
        return _normalised(noise)
    topics = CENTRES[rng.integers(TOPICS, size=count)]
    return _normalised(topics + SPREAD * noise / np.sqrt(DIM))


async def new_agent(sessions: async_sessionmaker[AsyncSession], label: str) -> uuid.UUID:
    async with db.transaction(sessions) as session:
        agent = Agent(tenant_id=DEFAULT_TENANT_ID, name=label)
        session.add(agent)
        await session.flush()
        return agent.id


async def fill(sessions: async_sessionmaker[AsyncSession], size: int, label: str) -> tuple[uuid.UUID, np.ndarray]:
    agent_id = await new_agent(sessions, label)
    vectors = unit_vectors(size)
    for start in range(0, size, INSERT_BATCH):
        batch = vectors[start : start + INSERT_BATCH]
        await table_upkeep.insert(sessions, table_upkeep.rows(agent_id, texts(len(batch)), batch))
    return agent_id, vectors


async def timed_searches(
    sessions: async_sessionmaker[AsyncSession],
    agent_id: uuid.UUID,
    mode: Mode,
    queries: list[tuple[list[float], list[str]]],
    ef_search: int | None = None,
) -> tuple[list[float], list[list[uuid.UUID]]]:
    latencies: list[float] = []
    found: list[list[uuid.UUID]] = []
    for embedding, terms in queries:
        async with sessions() as session:
            if ef_search:
                await (await session.connection()).execute(text(f"SET hnsw.ef_search = {ef_search}"))
            started = time.perf_counter()
            query = SearchQuery(" ".join(terms), k=10, mode=mode)
            hits = await PassageRepository(session).hybrid_search(agent_id, query, embedding)
            latencies.append((time.perf_counter() - started) * 1000)
            found.append([p.id for p, _ in hits])
    return latencies, found


async def explained(sessions: async_sessionmaker[AsyncSession], agent_id: uuid.UUID, query: tuple[list[float], list[str]]) -> str:
    embedding, terms = query
    sql, params = search_statement(ArchivalPassage, agent_id, SearchQuery(" ".join(terms), k=10), embedding)
    async with sessions() as session:
        return await explain(session, sql, params)


async def stored_vectors(sessions: async_sessionmaker[AsyncSession], agent_id: uuid.UUID) -> tuple[list[uuid.UUID], np.ndarray]:
    async with sessions() as session:
        rows = (
            await (await session.connection()).execute(
                text("SELECT id, embedding FROM archival_passages WHERE agent_id = :a"), {"a": agent_id}
            )
        ).all()
    vectors = [json.loads(r.embedding) if isinstance(r.embedding, str) else r.embedding for r in rows]
    return [r.id for r in rows], np.asarray(vectors, dtype=np.float32)


async def overlap(
    sessions: async_sessionmaker[AsyncSession],
    agent_id: uuid.UUID,
    queries: list[tuple[list[float], list[str]]],
    found: list[list[uuid.UUID]],
) -> float:
    """Mean share of the exact top 10 (numpy, cosine over the stored vectors) that the vector leg returned."""
    ids, matrix = await stored_vectors(sessions, agent_id)
    shares = []
    for (embedding, _), got in zip(queries, found, strict=True):
        exact = {ids[i] for i in np.argsort(-(matrix @ np.asarray(embedding, dtype=np.float32)))[:10]}
        shares.append(len(exact & set(got)) / len(exact))
    return statistics.mean(shares)


async def lexical_triggers(sessions: async_sessionmaker[AsyncSession], *, enabled: bool) -> None:
    """A bulk load skips the statistics triggers (migrations 0005, 0017) and counts once at the end, with
    the same statements the migration uses for rows already stored."""
    async with db.transaction(sessions) as session:
        conn = await session.connection()
        action = "ENABLE" if enabled else "DISABLE"
        for event in ("insert", "delete", "update"):
            await conn.execute(text(f"ALTER TABLE archival_passages {action} TRIGGER archival_passages_lexical_{event}"))
        if enabled:
            for statement in _statistics_migration().backfill("archival_passages"):
                await conn.execute(text(statement))


def _statistics_migration() -> ModuleType:
    """Migration 0005 as a module (alembic/versions is not a package)."""
    path = Path(__file__).resolve().parent.parent / "alembic" / "versions" / "0005_lexical_statistics.py"
    spec = importlib.util.spec_from_file_location("lexical_statistics_migration", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def build_own_indexes(engine: AsyncEngine) -> float:
    """What the service's background round does, once; the seconds it took."""
    started = time.perf_counter()
    built = await agent_indexes.maintain_once(engine, TABLES)
    seconds = time.perf_counter() - started
    async with engine.connect() as conn:
        size = (
            await conn.execute(
                text(
                    "SELECT coalesce(sum(pg_relation_size(c.oid)), 0) FROM pg_class c WHERE c.relname ~ '^ix_archival_passages_agent_[0-9a-f]{32}$'"
                )
            )
        ).scalar_one()
        await conn.execute(text("ANALYZE archival_passages"))
        await conn.commit()
    print(f"{len(built)} own HNSW index(es) built in {seconds:.0f}s: {size / 2**20:,.0f} MiB\n", flush=True)
    return seconds


Queries = list[tuple[list[float], list[str]]]


def new_queries() -> Queries:
    return [(v.tolist(), list(dict.fromkeys(words(TERMS_PER_QUERY)))) for v in unit_vectors(QUERIES)]


async def report(sessions: async_sessionmaker[AsyncSession], agents: dict[str, uuid.UUID], queries: Queries) -> None:
    print(f"{'agent':>22} | {'mode':13} | {'p50 ms':>7} | {'p95 ms':>7} | p50 / vector p50 | vector top-10 overlap with exact")
    for label, agent_id in agents.items():
        p50: dict[str, float] = {}
        runs: list[tuple[Mode, int | None]] = [(m, None) for m in MODES] + [("vector", ef) for ef in EF_SEARCH]
        for mode, ef in runs:
            await timed_searches(sessions, agent_id, mode, queries[:3], ef)  # warm-up: plans, index pages
            latencies, found = await timed_searches(sessions, agent_id, mode, queries, ef)
            latencies.sort()
            name = f"{mode} ef={ef}" if ef else mode
            p50[name] = statistics.median(latencies)
            p95 = latencies[int(0.95 * (len(latencies) - 1))]
            agreement = f"{await overlap(sessions, agent_id, queries, found):.3f}" if mode == "vector" else ""
            print(
                f"{label:>22} | {name:13} | {p50[name]:7.1f} | {p95:7.1f} | {p50[name] / p50['vector']:16.2f} | {agreement}",
                flush=True,
            )
        print(f"{label:>22} | hybrid, EXPLAIN ANALYZE of one query: " + await explained(sessions, agent_id, queries[0]))


async def load(
    sessions: async_sessionmaker[AsyncSession], sizes: list[int], many: int, per_agent: int
) -> tuple[dict[str, uuid.UUID], list[uuid.UUID]]:
    """The large agents by label, and the crowd; the BM25 statistics counted once at the end."""
    await lexical_triggers(sessions, enabled=False)
    started = time.perf_counter()
    large = {f"{size:,} rows (#{i})": (await fill(sessions, size, f"scale {i}: {size}"))[0] for i, size in enumerate(sizes, 1)}
    crowd = [(await fill(sessions, per_agent, f"crowd {i}"))[0] for i in range(many)]
    seconds = time.perf_counter() - started
    total = sum(sizes) + many * per_agent
    print(f"Loaded {total:,} passages into {len(sizes) + many} agents in {seconds:.0f}s ({total / seconds:,.0f}/s)", flush=True)
    started = time.perf_counter()
    await lexical_triggers(sessions, enabled=True)
    print(f"BM25 statistics computed for them in one pass in {time.perf_counter() - started:.0f}s", flush=True)
    return large, crowd


async def upkeep(engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], large: uuid.UUID, spare: uuid.UUID) -> None:
    """Inserts as the service makes them (statistics triggers on, every index kept), then VACUUM after deletes:
    of 50 new agents (their rows spread over the table), and of one agent (autovacuum then visits the table holding
    its rows: the whole table, or the agent's partition)."""
    started = time.perf_counter()
    added = [(await fill(sessions, 1000, f"added {i}"))[0] for i in range(50)]
    print(f"insert, batches of 1,000 into 50 new agents: {50_000 / (time.perf_counter() - started):,.0f} passages/s")
    for agent_id, label in ((large, "the largest agent"), (spare, "an agent of the crowd")):
        started = time.perf_counter()
        for _ in range(SINGLE_INSERTS):
            await table_upkeep.insert(sessions, table_upkeep.rows(agent_id, texts(1), unit_vectors(1)))
        print(f"insert, one passage per transaction into {label}: {SINGLE_INSERTS / (time.perf_counter() - started):,.0f}/s")
    deleted = await table_upkeep.delete_agents(sessions, added)
    print(f"delete those 50 agents, one per transaction: {deleted / 50:.2f}s each")
    print(f"VACUUM of the table after that: {await table_upkeep.vacuum(engine, table_upkeep.TABLE):.1f}s")
    home = await table_upkeep.home_of(engine, spare)
    await table_upkeep.delete_agents(sessions, [spare])
    print(f"VACUUM of {home} after deleting one agent of the crowd: {await table_upkeep.vacuum(engine, home):.2f}s", flush=True)


@dataclass
class Store:
    agents: dict[str, uuid.UUID]  # searched, by label
    largest: uuid.UUID
    unsampled: list[uuid.UUID]  # of the crowd, not searched: each measurement deletes one


async def measure(engine: AsyncEngine, store: Store, queries: Queries) -> None:
    print(
        f"VACUUM (ANALYZE) before measuring: {await table_upkeep.vacuum(engine, table_upkeep.TABLE, '(ANALYZE)'):.0f}s",
        flush=True,
    )
    await build_own_indexes(engine)
    print(await table_upkeep.size_on_disk(engine), flush=True)
    sessions = db.session_factory(engine)
    await report(sessions, store.agents, queries)
    if store.unsampled:
        await upkeep(engine, sessions, store.largest, store.unsampled.pop())


async def measured(url: str, store: Store, queries: Queries) -> None:
    engine = db.create_engine(url)
    try:
        await measure(engine, store, queries)
    finally:
        await engine.dispose()


async def loaded(url: str, args: argparse.Namespace) -> Store:
    engine = db.create_engine(url)
    try:
        large, crowd = await load(db.session_factory(engine), args.sizes, args.agents, args.per_agent)
    finally:
        await engine.dispose()
    picked = rng.choice(len(crowd), size=min(args.sampled, len(crowd)), replace=False)
    sampled = {f"{i} of {args.agents:,}x{args.per_agent:,}": crowd[i] for i in picked}
    largest = list(large.values())[args.sizes.index(max(args.sizes))] if args.sizes else crowd[0]
    return Store(large | sampled, largest, [a for a in crowd if a not in sampled.values()])


def main(args: argparse.Namespace) -> None:
    server, url = start_database(Path(tempfile.mkdtemp(prefix="engram-scale-")), DIM)
    try:
        if args.before_after:
            db.run_migrations(url, DIM, ONE_TABLE, downgrade=True)
        store = asyncio.run(loaded(url, args))
        queries = new_queries()
        asyncio.run(measured(url, store, queries))
        if args.before_after:
            started = time.perf_counter()
            db.run_migrations(url, DIM)
            print(
                f"\nUpgrade to the latest revision (0015 partitions the tables by agent): {time.perf_counter() - started:.0f}s",
                flush=True,
            )
            asyncio.run(measured(url, store, queries))
    finally:
        server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10_000, 100_000], help="one agent of each size")
    parser.add_argument("--agents", type=int, default=0, help="this many further agents of --per-agent passages")
    parser.add_argument("--per-agent", type=int, default=1000)
    parser.add_argument("--sampled", type=int, default=5, help="how many of those agents to search")
    parser.add_argument("--uniform", action="store_true", help="uniform random vectors instead of clustered ones")
    parser.add_argument(
        "--before-after",
        action="store_true",
        help="load one table (migration 0014), measure, partition it by agent (0015) and measure again; inserts and VACUUM too",
    )
    main(parser.parse_args())
