"""Memory in the prompt: what automatic recollection puts into the model's first request of a turn, on every set.

Each corpus of bench/retrieval_sets.py goes into its own agent (an import job, `POST …/archival/import`, one turn per passage), and
each question is sent as a chat message (`POST …/chat`) to the service in process, whose LLM is the scripted
OpenAI-compatible server on loopback (it answers every request with `send_message`). Measured on the first LLM
request of each turn: the share of the question's evidence turns that its "Possibly relevant memories" section
holds, the share of questions with any evidence there, and the characters of recollected memory. The Japanese
set's unrelated questions measure the other side: how often memory is injected when none applies. Questions of one
corpus go to one agent in order, as a user would ask them (earlier questions become recall memory).

Before the chat runs, the gate's parameters are swept offline on the same hybrid hits (as many as recollect() searches, through
ArchivalMemory.search, with the margins and coverages recollect() computes) through recollection.select(), the
function the service runs: the shipped design, each parameter moved alone from it (the sensitivity table), and the
design before the score ratio for evident hits, each set at once.

    python -m bench.recollection --cache DIR          # vectors from bench/retrieval.py's cache
    python -m bench.recollection --sets locomo japanese
"""

import argparse
import asyncio
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from app import db
from app.llm.embeddings import Embedder, build_embedder
from app.main import create_app
from app.memory import recollection
from app.settings import Settings
from bench.embedding_cache import CachedEmbedder
from bench.retrieval import start_database
from bench.retrieval_sets import DEFAULT_SETS, SETS, RetrievalSet
from testkit.bulk import import_passages
from testkit.scripted_llm import ScriptedLLM, call, tools

MEMORIES = "## Possibly relevant memories"
SHIPPED = {
    "k": Settings.model_fields["auto_retrieval_k"].default,
    "budget": recollection.BUDGET_CHARS,
    "company": recollection.COMPANY_RATIO,
    "evident_ratio": recollection.EVIDENT_RATIO,
}
SWEEP = {
    "k": (5, 10, 15, 20),
    "budget": (1500, 2000, 2500, 3000),
    "company": (0.7, 0.8, 0.9, 1.01),  # 1.01: evident hits only
    "evident_ratio": (0.0, 0.6, 0.62, 0.64, 0.66, 0.665, 0.67, 0.68, 0.7, 0.75),  # 0.0: every evident hit
}
BEFORE = {"k": 10, "budget": 1500, "company": 0.8, "evident_ratio": 0.0}  # until 2026-12-05


def memories_of(request: dict) -> str:
    system = request["messages"][0]["content"]
    if MEMORIES not in system:
        return ""
    section = system.split(MEMORIES, 1)[1].split("\n", 1)[1]
    return section.split("\n\n## ", 1)[0].split("\n\nCurrent time: ", 1)[0]


def in_prompt(section: str, passages: list[str], evidence) -> int:
    return sum(passages[i][: recollection.RECOLLECTION_CHARS] in section for i in evidence)


def figures(rows: list[tuple[int, int, int]], unrelated: list[int]) -> dict:
    """rows: per question with evidence (evidence turns in the prompt, evidence turns, characters); unrelated: per
    question that memory cannot answer, the characters injected."""
    return {
        "evidence turns": sum(r[0] for r in rows) / max(sum(r[1] for r in rows), 1),
        "questions with evidence": float(np.mean([r[0] > 0 for r in rows])) if rows else float("nan"),
        "median chars": statistics.median(r[2] for r in rows) if rows else float("nan"),
        "mean chars": statistics.fmean(r[2] for r in rows) if rows else float("nan"),
        "unrelated injected": float(np.mean([c > 0 for c in unrelated])) if unrelated else float("nan"),
    }


def describe(f: dict) -> str:
    unrelated = f" unrelated {f['unrelated injected']:.2f}" if not np.isnan(f["unrelated injected"]) else ""
    return f"ev {f['evidence turns']:.3f} q {f['questions with evidence']:.3f} chars {f['median chars']:5.0f} (mean {f['mean chars']:5.0f}){unrelated}"


async def hits_of(url: str, embedder: Embedder, agents: dict[str, str], sets: list[RetrievalSet]) -> dict:
    """Per set: per question, its archival hits as recollect() would see them at the largest k swept, and its
    evidence."""
    engine = db.create_engine(url)
    sessions = db.session_factory(engine)
    out: dict[str, list] = {}
    try:
        for s in sets:
            for corpus in s.corpora:
                for q in corpus.questions:
                    vector = await embedder.embed_query(q.text)
                    async with sessions() as session:
                        found = await recollection.hits(
                            session,
                            agents[corpus.name],
                            q.text,
                            vector,
                            embedder=embedder,
                            k=recollection.SEARCHED_PER_K * max(SWEEP["k"]),
                            context_start_seq=0,
                        )
                    out.setdefault(s.name, []).append((corpus, q, found))
    finally:
        await engine.dispose()
    return out


def designs() -> list[dict]:
    """The shipped design, each parameter moved alone from it, and the design before."""
    moved = [{**SHIPPED, lever: value} for lever, values in SWEEP.items() for value in values if value != SHIPPED[lever]]
    return [SHIPPED, *moved, BEFORE]


def sweep(hits: dict) -> None:
    print(
        "\n== Gate sensitivity, offline on the archival hits (recollection.select): evidence turns in the prompt, questions with any, median chars"
    )
    for params in designs():
        cells = []
        for name, questions in hits.items():
            rows, unrelated = [], []
            for corpus, q, found in questions:
                section = recollection.render(recollection.select(found, **params)) or ""
                if q.evidence:
                    rows.append((in_prompt(section, corpus.passages, q.evidence), len(q.evidence), len(section)))
                elif q.category == "unrelated":
                    unrelated.append(len(section))
            cells.append(f"{name}: {describe(figures(rows, unrelated))}")
        mark = " *" if params == SHIPPED else " before" if params == BEFORE else ""
        design = f"k={params['k']:<2} budget={params['budget']:<4} company={params['company']:<4} evident_ratio={params['evident_ratio']:<4}"
        print(f"{design}{mark:7} | " + " | ".join(cells))


def chat_path(client: TestClient, llm: ScriptedLLM, agents: dict[str, str], sets: list[RetrievalSet]) -> None:
    print(
        f"\n== Through the chat path (auto_retrieval_k={SHIPPED['k']}, budget {SHIPPED['budget']}, company {SHIPPED['company']}, evident_ratio {SHIPPED['evident_ratio']})"
    )
    for s in sets:
        rows, unrelated = [], []
        for corpus in s.corpora:
            for q in corpus.questions:
                first = len(llm.requests)
                response = client.post(f"/v1/agents/{agents[corpus.name]}/chat", json={"message": q.text})
                assert response.status_code == 200, response.text
                section = memories_of(llm.requests[first])
                if q.evidence:
                    rows.append((in_prompt(section, corpus.passages, q.evidence), len(q.evidence), len(section)))
                elif q.category == "unrelated":
                    unrelated.append(len(section))
        f = figures(rows, unrelated)
        print(f"{s.name:<16} {len(rows)} questions: {describe(f)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=DEFAULT_SETS)
    parser.add_argument("--limit", type=int, help="only the first N corpora of each set")
    parser.add_argument("--cache", type=Path, help="embeddings kept across runs (bench/embedding_cache.py)")
    parser.add_argument("--no-sweep", action="store_true", help="only the chat path")
    args = parser.parse_args()
    sets = [SETS[name](limit=args.limit) for name in args.sets]
    embedder: Embedder = build_embedder(Settings())
    if args.cache:
        embedder = CachedEmbedder(embedder, args.cache)
    llm = ScriptedLLM().start()
    llm.reset(fallback=tools(call("send_message", text="Noted.")))
    root = Path(tempfile.mkdtemp(prefix="engram-recollection-"))
    server, url = start_database(root, embedder.dim)
    try:
        settings = Settings(database_url=url, openai_base_url=llm.url, openai_api_key="bench", llm_model="scripted")
        with TestClient(create_app(settings, embedder=embedder), client=("127.0.0.1", 50000)) as client:
            agents = {}
            for s in sets:
                for corpus in s.corpora:
                    agents[corpus.name] = client.post("/v1/agents", json={"name": f"bench {corpus.name}"}).json()["id"]
                    import_passages(client, agents[corpus.name], corpus.passages, corpus.dates)
                    if isinstance(embedder, CachedEmbedder):
                        embedder.save()
            if not args.no_sweep:
                sweep(asyncio.run(hits_of(url, embedder, agents, sets)))
            chat_path(client, llm, agents, sets)
    finally:
        llm.stop()
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
