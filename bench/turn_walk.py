"""The walk of an agent id through one chat turn: which modules of app/ it passes through, in order.

A scripted OpenAI-compatible LLM (testkit/scripted_llm.py) answers with one tool call and then the reply; the app
runs in-process on its embedded PostgreSQL (a temporary data directory). During one turn (after a warm-up turn) a
profiler on the app's event-loop thread notes every call into app/ whose arguments hold the agent's id (a coroutine
once, not at each resumption). Printed:
the stops (consecutive calls in one module are one stop), the rooms (distinct modules), the returns (stops in a
module the walk had already left), and the walk itself.

    python -m bench.turn_walk
"""

import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from fastapi.testclient import TestClient

from app.llm.embeddings.providers import E5Embedder
from app.main import create_app
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, tools


def tracer(agent_id: uuid.UUID, walk: list[str]) -> Callable[[FrameType, str, Any], None]:
    wanted = {agent_id, str(agent_id)}
    seen: dict[int, FrameType] = {}  # a coroutine's frame "calls" again each time it resumes: count it once (held, so
    # that no later frame takes its id)

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event != "call" or id(frame) in seen:
            return
        seen[id(frame)] = frame
        module = str(frame.f_globals.get("__name__", ""))
        if not module.startswith("app.") or module == "app.metrics":
            return
        if any(isinstance(v, uuid.UUID | str) and v in wanted for v in frame.f_locals.values()):
            if not walk or walk[-1] != module:
                walk.append(module)

    return profile


def main() -> None:
    llm = ScriptedLLM().start()
    with tempfile.TemporaryDirectory() as data:
        settings = Settings(
            data_dir=Path(data), openai_base_url=llm.url, openai_api_key="walk", llm_model="scripted", llm_max_retries=0
        )
        with TestClient(create_app(settings, embedder=E5Embedder(2)), client=("127.0.0.1", 50000)) as client:
            agent = client.post("/v1/agents", json={"name": "walker"}).json()
            script = (
                tools(call("archival_memory_create", content="The user walks to work")),
                tools(call("send_message", text="Noted")),
            )
            llm.reset(*script)
            assert client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "warm-up"}).status_code == 200
            llm.reset(*script)
            walk: list[str] = []
            assert client.portal is not None
            client.portal.call(sys.setprofile, tracer(uuid.UUID(agent["id"]), walk))
            try:
                turn = client.post(f"/v1/agents/{agent['id']}/chat", json={"message": "I walk to work every day."})
            finally:
                client.portal.call(sys.setprofile, None)
            assert turn.status_code == 200, turn.text
    llm.stop()
    packages = [m for i, m in enumerate(p.split(".")[1] for p in walk) if i == 0 or m != walk[i - 1].split(".")[1]]
    for name, rooms in (("modules", walk), ("packages", packages)):
        print(f"{name}: stops {len(rooms)}, rooms {len(set(rooms))}, returns {returns_in(rooms)}")
        print("  " + " -> ".join(m.removeprefix("app.") for m in rooms))


def returns_in(walk: list[str]) -> int:
    """Stops in a room the walk had already left."""
    left: set[str] = set()
    returns = 0
    for before, room in zip([""] + walk, walk, strict=False):
        returns += room in left
        left.add(before)
    return returns


if __name__ == "__main__":
    main()
