"""MCP clients (the `mcp` SDK's own client) over streamable HTTP at /mcp, through the in-process app, and over stdio
with `engram mcp` as a real process: the tools, a block edit read back through the HTTP API, an archival passage
inserted and found, a chat turn; the same keys and tenants as the HTTP API."""

import json
import subprocess
import sys
import uuid

import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import TextResourceContents

from testkit.scripted_llm import ScriptedLLM, call, tools
from tests.support import ROOT
from tests.support.mcp import ACCEPT, INITIALIZE, MCP_URL, error_text, over_http, use
from tests.support.metrics import metric
from tests.support.service import admin, tenant_with_key

TOOLS = {
    "list_agents",
    "read_core_memory",
    "edit_core_memory_block",
    "insert_archival_memory",
    "search_archival_memory",
    "search_conversation_history",
    "recall_context",
    "chat_with_agent",
}


def stdio(database_url: str, llm: ScriptedLLM, key: str | None = None) -> StdioServerParameters:
    env = {
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "test",
        "ENGRAM_LLM_MODEL": "scripted",
        "ENGRAM_LLM_MAX_RETRIES": "0",
    }
    if key:
        env["ENGRAM_API_KEY"] = key
    return StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp"], env=env, cwd=ROOT)


def blocks_over_http(client: TestClient, agent_id: str, key: str | None = None) -> dict[str, dict]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = client.get(f"/v1/agents/{agent_id}/memory", headers=headers)
    assert response.status_code == 200, response.text
    return {b["label"]: b for b in response.json()["blocks"]}


def new_agent(client: TestClient, key: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = client.post("/v1/agents", json={"name": f"mcp-{uuid.uuid4().hex[:8]}"}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


async def edit_then_search(session: Client, client: TestClient, agent: dict, key: str | None) -> None:
    """The memory round trip every transport must give: edit a block (seen by the HTTP API), insert and find a
    passage."""
    blocks = (await use(session, "read_core_memory", agent_id=agent["id"]))["blocks"]
    human = next(b for b in blocks if b["label"] == "human")
    edited = await use(
        session,
        "edit_core_memory_block",
        agent_id=agent["id"],
        label="human",
        value="Name: Aiko. Likes ramen.",
        expected_version=human["version"],
    )
    assert edited["version"] == human["version"] + 1
    seen = blocks_over_http(client, agent["id"], key)["human"]
    assert (seen["value"], seen["version"]) == ("Name: Aiko. Likes ramen.", human["version"] + 1)
    history = client.get(f"/v1/agents/{agent['id']}/memory/human/history", headers=_auth(key)).json()["items"]
    assert (history[0]["value"], history[0]["source"]) == ("Name: Aiko. Likes ramen.", "api")

    stored = await use(
        session, "insert_archival_memory", agent_id=agent["id"], content="Aiko's daughter Mei was born in 2019", tags=["Family"]
    )
    assert stored["duplicate"] is False and stored["tags"] == ["family"]
    await use(session, "insert_archival_memory", agent_id=agent["id"], content="The dentist appointment is on Thursday")
    found = (await use(session, "search_archival_memory", agent_id=agent["id"], query="when was Mei born", k=2))["passages"]
    assert found[0]["id"] == stored["id"] and found[0]["score"] > 0
    tagged = await use(session, "search_archival_memory", agent_id=agent["id"], query="dentist", tags=["family"])
    assert [p["id"] for p in tagged["passages"]] == [stored["id"]]


def _auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026 per-request protocol, and the initialize handshake
async def test_memory_tools_over_streamable_http(keyed: TestClient, mode: str) -> None:
    _, key = tenant_with_key(keyed, f"mcp-{uuid.uuid4().hex[:8]}")
    agent = new_agent(keyed, key)
    async with over_http(keyed, key, mode) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        agents = (await use(session, "list_agents"))["agents"]
        assert [a["id"] for a in agents] == [agent["id"]]
        await edit_then_search(session, keyed, agent, key)

        stale = await session.call_tool(
            "edit_core_memory_block", {"agent_id": agent["id"], "label": "human", "value": "lost update", "expected_version": 1}
        )
        assert "precondition_failed" in error_text(stale) and "reload it and retry" in error_text(stale)
        unknown = await session.call_tool("edit_core_memory_block", {"agent_id": agent["id"], "label": "humn", "value": "x"})
        assert "no core memory block 'humn'" in error_text(unknown) and "human" in error_text(unknown)
        assert "humn" not in blocks_over_http(keyed, agent["id"], key)

        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["engram://agents/{agent_id}/blocks/{label}"]
        block = await session.read_resource(f"engram://agents/{agent['id']}/blocks/human")
        content = block.contents[0]
        assert isinstance(content, TextResourceContents) and content.text == "Name: Aiko. Likes ramen."


async def test_another_tenants_key_cannot_see_the_agent(keyed: TestClient) -> None:
    _, owner_key = tenant_with_key(keyed, f"owner-{uuid.uuid4().hex[:8]}")
    _, other_key = tenant_with_key(keyed, f"other-{uuid.uuid4().hex[:8]}")
    agent = new_agent(keyed, owner_key)
    before = blocks_over_http(keyed, agent["id"], owner_key)["human"]
    async with over_http(keyed, other_key) as session:
        assert (await use(session, "list_agents"))["agents"] == []
        for tool, arguments in [
            ("read_core_memory", {}),
            ("edit_core_memory_block", {"label": "human", "value": "taken over"}),
            ("insert_archival_memory", {"content": "planted"}),
            ("search_archival_memory", {"query": "anything"}),
            ("search_conversation_history", {"query": "anything"}),
            ("chat_with_agent", {"message": "hello"}),
        ]:
            result = await session.call_tool(tool, {"agent_id": agent["id"], **arguments})
            assert error_text(result).endswith(f"not_found: no agent {agent['id']}"), tool
        with pytest.raises(MCPError, match="no agent"):
            await session.read_resource(f"engram://agents/{agent['id']}/blocks/human")
    assert blocks_over_http(keyed, agent["id"], owner_key)["human"] == before
    listing = keyed.get(f"/v1/agents/{agent['id']}/archival", headers=_auth(owner_key)).json()["items"]
    assert listing == []


# A raw JSON-RPC `initialize`, for the checks made before MCP runs.
def test_mcp_requests_are_authenticated_like_the_api(keyed: TestClient) -> None:
    missing = keyed.post("/mcp", json=INITIALIZE, headers=ACCEPT)
    assert missing.status_code == 401 and missing.json()["error"] == "unauthorized"
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    wrong = keyed.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "Authorization": "Bearer not-a-key"})
    assert wrong.status_code == 401 and wrong.json() == {"error": "unauthorized", "detail": "the API key is invalid or revoked"}
    as_admin = keyed.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **admin()})
    assert as_admin.status_code == 403 and as_admin.json()["error"] == "forbidden"
    _, key = tenant_with_key(keyed, f"mcp-{uuid.uuid4().hex[:8]}")
    # With keys the key is the protection: any Host (a proxy's name) is served.
    served = keyed.post("https://engram.example.com/mcp", json=INITIALIZE, headers={**ACCEPT, "X-API-Key": key})
    assert served.status_code == 200 and served.json()["result"]["serverInfo"]["name"] == "engram"


def test_without_keys_only_loopback_hosts_are_served(client: TestClient) -> None:
    """No keys: loopback clients are trusted, so a page whose host name was rebound to 127.0.0.1 must not get in."""
    rebound = client.post("http://attacker.example:8000/mcp", json=INITIALIZE, headers=ACCEPT)
    assert rebound.status_code == 403 and rebound.json()["error"] == "forbidden"
    foreign_origin = client.post(MCP_URL, json=INITIALIZE, headers={**ACCEPT, "Origin": "http://attacker.example"})
    assert foreign_origin.status_code == 403
    local = client.post(MCP_URL, json=INITIALIZE, headers={**ACCEPT, "Origin": "http://localhost:6274"})
    assert local.status_code == 200, local.text


async def test_chat_and_conversation_search_over_http(client: TestClient, llm: ScriptedLLM) -> None:
    agent = new_agent(client)
    llm.reset(
        tools(call("core_memory_append", label="human", content="Favourite food: ramen")),
        tools(call("send_message", text="Ramen, noted!")),
    )
    async with over_http(client) as session:
        reply = await use(session, "chat_with_agent", agent_id=agent["id"], message="My favourite food is ramen")
        assert (reply["reply"], reply["stop_reason"]) == ("Ramen, noted!", "end_turn")
        turn = client.get(f"/v1/agents/{agent['id']}/turns/{reply['turn_id']}")
        assert turn.status_code == 200 and turn.json()["reply"] == "Ramen, noted!"
        assert "Favourite food: ramen" in blocks_over_http(client, agent["id"])["human"]["value"]
        hits = (await use(session, "search_conversation_history", agent_id=agent["id"], query="favourite food"))["messages"]
        assert ("user", "My favourite food is ramen") in [(h["role"], h["content"]) for h in hits]
        assert {h["turn_id"] for h in hits} == {reply["turn_id"]}


async def test_recall_context_hands_over_what_the_rest_api_does(client: TestClient) -> None:
    agent = new_agent(client)
    facts = ["The user's cat is called Mochi.", "The user is allergic to peanuts.", "ユーザーは大阪に住んでいます。"]
    client.post(f"/v1/agents/{agent['id']}/archival/batch", json={"items": [{"content": f} for f in facts]})
    client.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "Name: Aiko"})
    before = client.get("/metrics").text
    async with over_http(client) as session:
        recalled = await use(session, "recall_context", agent_id=agent["id"], query="What is my cat called?", max_chars=300)
        assert recalled["memories"][0]["content"] == facts[0]
        assert "Name: Aiko" in recalled["text"] and 0 < recalled["chars"] <= 300
        rest = client.post(
            f"/v1/agents/{agent['id']}/recollection", json={"query": "What is my cat called?", "max_chars": 300}
        ).json()
        assert recalled == rest
        client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user's dog is called Pochi.", "tags": ["pets"]})
        pets = await use(session, "recall_context", agent_id=agent["id"], query="What are my pets called?", tags=["pets"])
        assert [m["content"] for m in pets["memories"]] == ["The user's dog is called Pochi."]
        # as memory stood in 2000, before any of it was stored
        then = await use(session, "recall_context", agent_id=agent["id"], query="What is my cat called?", as_of="2000-01-01")
        assert then["memories"] == [] and "Name: Aiko" not in then["text"]
        not_a_time = await session.call_tool("recall_context", {"agent_id": agent["id"], "query": "cats", "as_of": "soon"})
        assert "invalid_request" in error_text(not_a_time)
        nothing = await use(session, "recall_context", agent_id=agent["id"], query="Who wrote Pride and Prejudice?")
        assert nothing["memories"] == [] and "<memories>" not in nothing["text"]
        blank = await session.call_tool("recall_context", {"agent_id": agent["id"], "query": "   "})
        assert "blank" in error_text(blank)
        unknown = await session.call_tool("recall_context", {"agent_id": str(uuid.uuid4()), "query": "cats"})
        assert "not_found" in error_text(unknown)
    after = client.get("/metrics").text
    for outcome, times in (("memories", 2), ("gated", 1), ("empty", 1)):  # counted as MCP's, apart from the REST call's
        counted = [metric(text, "engram_recollections_total", caller="mcp", outcome=outcome) for text in (before, after)]
        assert counted[1] - counted[0] == times


async def test_stdio_acts_for_the_keys_tenant(keyed: TestClient, keyed_database: str, llm: ScriptedLLM) -> None:
    _, key = tenant_with_key(keyed, f"stdio-{uuid.uuid4().hex[:8]}")
    _, other_key = tenant_with_key(keyed, f"stdio-other-{uuid.uuid4().hex[:8]}")
    agent = new_agent(keyed, key)
    hidden = new_agent(keyed, other_key)
    async with Client(stdio(keyed_database, llm, key)) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        assert [a["id"] for a in (await use(session, "list_agents"))["agents"]] == [agent["id"]]
        await edit_then_search(session, keyed, agent, key)
        refused = await session.call_tool("read_core_memory", {"agent_id": hidden["id"]})
        assert error_text(refused).endswith(f"not_found: no agent {hidden['id']}")
        llm.reset(tools(call("send_message", text="Hello from stdio")))
        reply = await use(session, "chat_with_agent", agent_id=agent["id"], message="hi")
        assert reply["reply"] == "Hello from stdio"


def test_stdio_speaks_only_protocol_on_stdout(client: TestClient, database_url: str, llm: ScriptedLLM) -> None:
    """Without a key `engram mcp` acts for the default tenant; stdout carries JSON-RPC and nothing else, the logs
    go to stderr."""
    agent = new_agent(client)
    params = stdio(database_url, llm)
    process = subprocess.Popen(
        [params.command, *params.args],
        env={"PATH": "/usr/bin:/bin", **(params.env or {})},
        cwd=params.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdin = process.stdin
    assert stdin and process.stdout

    def send(message: dict) -> None:
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            }
        )
        assert json.loads(process.stdout.readline())["result"]["serverInfo"]["name"] == "engram"
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}})
        listed = json.loads(process.stdout.readline())["result"]["structuredContent"]["agents"]
        assert agent["id"] in [a["id"] for a in listed]
        rest, errors = process.communicate(timeout=60)  # closes stdin: the client has gone
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, errors
    assert rest.strip() == ""  # nothing but the two answers, ever
    assert "MCP over stdio, acting for tenant 00000000-0000-0000-0000-000000000000" in errors  # logs: stderr


def test_stdio_refuses_an_invalid_key(keyed: TestClient, keyed_database: str, llm: ScriptedLLM) -> None:
    tenant_with_key(keyed, f"stdio-{uuid.uuid4().hex[:8]}")  # keys exist in this database
    params = stdio(keyed_database, llm, "not-a-key")
    result = subprocess.run(
        [params.command, *params.args],
        env={"PATH": "/usr/bin:/bin", **(params.env or {})},
        cwd=params.cwd,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "engram mcp: the API key is invalid or revoked" in result.stderr
