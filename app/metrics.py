"""Prometheus metrics (per process; scrape every replica)."""

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

TURNS = Counter("engram_turns_total", "Finished turns by stop reason", ["stop_reason"])
MEMORY_PASSES = Counter("engram_memory_passes_total", "Finished memory passes by stop reason", ["stop_reason"])
TURN_STEPS = Histogram("engram_turn_steps", "LLM steps per turn", buckets=(1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50))
LLM_SECONDS = Histogram("engram_llm_request_seconds", "LLM chat completion latency", ["outcome"])
LLM_ERRORS = Counter("engram_llm_errors_total", "LLM calls that failed after retries", ["kind"])
TOOL_CALLS = Counter("engram_tool_calls_total", "Tool calls by tool and outcome", ["tool", "ok"])
SEARCH_SECONDS = Histogram(
    "engram_search_seconds", "Hybrid search latency", ["memory"], buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
)
# Whether the relevance gate let any memory through, by who asked: a gate that is always shut or always open (an
# embedder far from the one its thresholds were chosen with) shows here first. `empty`: nothing was found at all (an
# agent with no memory yet); `gated`: hits were found and none handed over (none stood out, or the caller has them).
RECOLLECTIONS = Counter(
    "engram_recollections_total",
    "Recollections by who asked (api, mcp, chat) and outcome (memories, gated, acknowledged, empty)",
    ["caller", "outcome"],
)
RECOLLECTED_MEMORIES = Histogram(
    "engram_recollected_memories",
    "Memories handed over by a recollection that gave any",
    ["caller"],
    buckets=(1, 2, 3, 5, 8, 13, 21, 34),
)
LOCK_WAIT_SECONDS = Histogram("engram_turn_lock_wait_seconds", "Time a turn waited for its agent's lock", ["outcome"])
TURN_PHASE_SECONDS = Histogram(
    "engram_turn_phase_seconds",
    "Where a turn's time goes: begin (store the message), embed_query, context (the first step's includes recollect), "
    "recollect, llm, step (tools + commit; the last one concludes the turn), finish",
    ["phase"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
QUOTA_REFUSALS = Counter("engram_quota_refusals_total", "Requests and turns refused by a quota (429)", ["metric", "scope"])
# Read at scrape time (main.py sets what they read): what a long run would leak, next to the process collector's
# process_resident_memory_bytes and process_open_fds.
ASYNCIO_TASKS = Gauge("engram_asyncio_tasks", "asyncio tasks alive in the service's event loop")
DB_CONNECTIONS_IN_USE = Gauge("engram_db_connections_in_use", "database connections checked out of the pool")
DB_READS = Counter("engram_db_reads_total", "GET and HEAD requests' database sessions, by where they read", ["target"])
REPLICA_LAG_SECONDS = Gauge(
    "engram_replica_lag_seconds", "How far a read replica was behind the primary at its last check", ["replica"]
)
REPLICA_USABLE = Gauge("engram_replica_usable", "1 while a read replica serves reads; 0 while it is down or lags", ["replica"])
HTTP_REQUESTS = Counter("engram_http_requests_total", "HTTP requests by method, route and status", ["method", "route", "status"])


@contextmanager
def turn_phase(name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        TURN_PHASE_SECONDS.labels(name).observe(time.perf_counter() - started)
