"""Agents as export documents: a populated agent, its export once its vectors have settled, the rows per table."""

import copy
import json
import re
import time
import uuid
from typing import Any

from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support.chat import chat
from tests.support.database import run_sql
from tests.support.service import ApiClient

TABLES = ("agents", "memory_blocks", "memory_block_revisions", "archival_passages", "messages", "turns", "turn_events")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def recall_text(message: dict[str, Any]) -> str:
    sent = [json.loads(c["arguments"]).get("text", "") for c in message["tool_calls"] or [] if c["name"] == "send_message"]
    return "\n".join(part for part in [message["content"], *sent] if part)


def settled_export(client: ApiClient, agent_id: str, **params: str) -> dict[str, Any]:
    """The export once the turn's messages have their vectors (they are embedded just after the turn commits)."""
    deadline = time.monotonic() + 30
    while True:
        response = client.get(f"/v1/agents/{agent_id}/export", params=params)
        assert response.status_code == 200, response.text
        document = response.json()
        pending = [
            m for m in document["messages"] if m["role"] in ("user", "assistant") and recall_text(m) and m["embedding"] is None
        ]
        if not pending or params.get("embeddings") == "false":
            return document
        assert time.monotonic() < deadline, f"messages never embedded: {pending}"
        time.sleep(0.1)


def comparable(document: dict[str, Any]) -> str:
    """The document with the ids an import replaces made positional: the agent's and each turn's (in order), and the
    rows' own ids (dropped; a passage's sources and successor name the rows by their place), so that two exports of
    the same memory compare equal. (A text quoting a row's id, a tool's result, keeps the id it was written with.)"""
    document = copy.deepcopy(document)
    document.pop("exported_at")
    names = {document["agent"].pop("id"): "AGENT"}
    names.update({turn.pop("id"): f"TURN-{i}" for i, turn in enumerate(document["turns"])})
    rows = {row.pop("id"): f"{kind}[{i}]" for kind in ("messages", "passages") for i, row in enumerate(document[kind])}
    for passage in document["passages"]:
        passage["sources"] = [rows.get(s, f"UNKNOWN-{s}") for s in passage.get("sources", [])]
        if passage.get("superseded_by"):
            passage["superseded_by"] = rows.get(passage["superseded_by"], f"UNKNOWN-{passage['superseded_by']}")
    text = json.dumps(document, ensure_ascii=False, sort_keys=True)
    return UUID.sub(lambda m: names.get(m.group(0), f"UNKNOWN-{m.group(0)}"), text)


def unique_name() -> str:
    """Tests share one database: an imported agent's name must not be one another test's agent has."""
    return f"Imported {uuid.uuid4().hex[:8]}"


def populate(client: ApiClient, agent: dict, llm: ScriptedLLM) -> None:
    """An agent with block history (by the agent and by the API), passages, messages and turns."""
    llm.reset(
        tools(call("core_memory_append", label="human", content="名前: 太郎"), content="名前を覚えておく。"),
        tools(call("archival_memory_create", content="太郎の好きな食べ物はラーメン", tags=["food"])),
        tools(call("send_message", text="よろしく、太郎さん！")),
        tools(call("send_message", text="Noted: green tea.")),
    )
    chat(client, agent, "僕の名前は太郎です。ラーメンが好き。")
    chat(client, agent, "I also like green tea.")
    put = client.put(f"/v1/agents/{agent['id']}/memory/persona", json={"value": "I am Hana."}, headers={"If-Match": "1"})
    assert put.status_code == 200, put.text
    added = client.post(
        f"/v1/agents/{agent['id']}/archival", json={"content": "The user's cat is called Mochi", "tags": ["pets"]}
    )
    assert added.status_code == 201, added.text


def counts(database_url: str) -> dict[str, int]:
    return {table: run_sql(database_url, f"SELECT count(*) FROM {table}")[0][0] for table in TABLES}
