"""The upgrade to tables partitioned by agent (migration 0015) on a store of --passages passages, timed, and the
downgrade back.

A fresh embedded PostgreSQL at migration 0014 (one table each) is filled the way bench/search_scale.py fills one
(synthetic passages, multi-row INSERTs, the BM25 statistics counted in one pass): one agent of a tenth of the
passages, the rest in agents of 1,000. Then `alembic upgrade head` as `engram migrate` runs it (ENGRAM_PARTITIONS,
default 16), then `downgrade` to 0014 and the upgrade again. Printed: each step's seconds, rows per second, and the
same search (hybrid, the large agent) before and after, p50 over 30 queries.

    python -m bench.partition_upgrade                      # 100,000 passages: ~5 minutes on 2 cores
"""

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from app import db
from bench.retrieval import start_database
from bench.search_scale import DIM, QUERIES, TERMS_PER_QUERY, fill, lexical_triggers, timed_searches, unit_vectors, words

BEFORE = "0014_unique_agent_names"


def migrate(url: str, revision: str, *, down: bool = False) -> float:
    """Seconds `engram migrate` (or `--down-to`) takes to bring the database to `revision`."""
    started = time.perf_counter()
    db.run_migrations(url, DIM, revision, downgrade=down)
    return time.perf_counter() - started


async def load(url: str, passages: int) -> uuid.UUID:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    try:
        await lexical_triggers(sessions, enabled=False)
        large, _ = await fill(sessions, passages // 10, "large")
        for i in range((passages - passages // 10) // 1000):
            await fill(sessions, 1000, f"crowd {i}")
        await lexical_triggers(sessions, enabled=True)
    finally:
        await engine.dispose()
    return large


async def search_p50(url: str, agent_id: uuid.UUID) -> float:
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    queries = [(v.tolist(), list(dict.fromkeys(words(TERMS_PER_QUERY)))) for v in unit_vectors(QUERIES)]
    try:
        await timed_searches(sessions, agent_id, "hybrid", queries[:3], None)
        latencies, _ = await timed_searches(sessions, agent_id, "hybrid", queries, None)
    finally:
        await engine.dispose()
    return statistics.median(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=100_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="  %(message)s")
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    server, url = start_database(Path(tempfile.mkdtemp(prefix="engram-partition-upgrade-")), DIM)
    try:
        migrate(url, BEFORE, down=True)
        started = time.perf_counter()
        large = asyncio.run(load(url, args.passages))
        print(f"loaded {args.passages:,} passages at {BEFORE} in {time.perf_counter() - started:.0f} s")
        before = asyncio.run(search_p50(url, large))
        up = migrate(url, "head")
        after = asyncio.run(search_p50(url, large))
        down = migrate(url, BEFORE, down=True)
        again = migrate(url, "head")
    finally:
        server.cleanup()
    print(f"upgrade to partitions: {up:.1f} s ({args.passages / up:,.0f} passages/s)")
    print(f"downgrade to one table: {down:.1f} s; upgrade again: {again:.1f} s")
    print(f"hybrid search of the {args.passages // 10:,}-passage agent, p50: {before:.1f} ms before, {after:.1f} ms after")


if __name__ == "__main__":
    main()
