"""The memory pass cites: its transcript's lines carry short references, its archival_memory_create takes those a
fact was drawn from, and the facts are stored with the ids of the messages they name (app/chat/citations.py)."""

from fastapi.testclient import TestClient

from testkit.scripted_llm import ScriptedLLM, call, text, tools
from tests.support.chat import chat, finished_pass, tool_results

MOVE = [
    {"role": "user", "content": "I moved from Tokyo to Osaka last week.", "occurred_at": "2024-10-01T09:00:00Z"},
    {"role": "assistant", "content": "Exciting! How is Osaka?", "occurred_at": "2024-10-01T09:00:05Z"},
    {"role": "user", "content": "Great. I started working at a bakery there.", "occurred_at": "2024-10-01T09:01:00Z"},
]
OSAKA = "The user lives in Osaka since October 2024."
BAKERY = "The user works at a bakery in Osaka."


def create(content: str, *sources: object) -> dict:
    return call("archival_memory_create", content=content, occurred_at="2024-10-01", sources=list(sources))


def handed_in_with_a_pass(client: TestClient, agent: dict, messages: list[dict]) -> tuple[list[str], dict]:
    """The hand-in's message ids and the pass it queued, once it has ended."""
    handed = client.post(f"/v1/agents/{agent['id']}/messages", json={"messages": messages, "memory_pass": True})
    assert handed.status_code == 201, handed.text
    return handed.json()["message_ids"], finished_pass(client, agent, handed.json()["memory_pass_id"])


def test_the_pass_stores_facts_with_the_messages_they_cite(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        # References as the transcript shows them, in capitals, as a number; one that names no line.
        tools(create(OSAKA, "m1"), create(BAKERY, "[m3]", "M1", "m99")),
        tools(create(OSAKA, 3, "m2", "m1")),  # the same fact again, drawn from more lines
        text("Stored the move and the job."),
    )
    ids, turn = handed_in_with_a_pass(client, agent, MOVE)
    assert (turn["status"], turn["stop_reason"]) == ("completed", "end_turn")

    # The transcript the LLM read: each line after its reference, and the instructions say to cite them.
    system, transcript = (m["content"] for m in llm.requests[0]["messages"])
    assert transcript.splitlines()[1:] == [
        "[m1] [2024-10-01 09:00] user: I moved from Tokyo to Osaka last week.",
        "[m2] [2024-10-01 09:00] assistant: Exciting! How is Osaka?",
        "[m3] [2024-10-01 09:01] user: Great. I started working at a bakery there.",
    ]
    assert "`sources` = the references of the messages it comes from" in system
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["tools"]}
    assert "sources" in offered["archival_memory_create"]["parameters"]["properties"]

    # Stored with the ids of the messages cited; the unknown reference dropped, and the pass's event says so.
    stored, with_unknown, again = tool_results(turn)
    assert all(r["ok"] for r in (stored, with_unknown, again)), tool_results(turn)
    assert stored["result"].startswith("Saved to archival memory (id ") and "nknown" not in stored["result"]
    assert "Unknown reference 'm99' ignored: the fact is stored without it." in with_unknown["result"]
    # A near-duplicate is not stored twice: the stored fact gains the lines it was drawn from again.
    assert again["result"].startswith("Already in archival memory (the lines you cited are now among its sources)")
    facts = {p["content"]: p["sources"] for p in client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]}
    assert facts == {OSAKA: [ids[0], ids[2], ids[1]], BAKERY: [ids[2], ids[0]]}

    # References are the pass's own: the next pass numbers its lines from m1 again, and m1 is its first line.
    later = [{"role": "user", "content": "My sister Yuki visits me in Osaka in December.", "occurred_at": "2024-10-02"}]
    llm.reset(tools(create("The user's sister Yuki visits in December 2024.", "m1", "m2")), text("Stored the visit."))
    [yuki_said], second = handed_in_with_a_pass(client, agent, later)
    assert llm.requests[0]["messages"][1]["content"].splitlines()[1:] == [
        "[m1] [2024-10-02 00:00] user: My sister Yuki visits me in Osaka in December."
    ]
    [result] = tool_results(second)
    assert "Unknown reference 'm2' ignored" in result["result"]
    yuki = client.get(f"/v1/agents/{agent['id']}/archival", params={"query": "Yuki December"}).json()["items"][0]
    assert (yuki["content"], yuki["sources"]) == ("The user's sister Yuki visits in December 2024.", [yuki_said])


def test_the_fact_that_replaces_another_cites_its_lines(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    base = f"/v1/agents/{agent['id']}"
    tokyo = client.post(f"{base}/archival", json={"content": "The user lives in Tokyo.", "occurred_at": "2019-04-01"}).json()
    llm.reset(
        tools(call("archival_memory_supersede", passage_id=tokyo["id"], content=OSAKA, sources=["m1", "m7"])),
        text("Superseded Tokyo."),
    )
    ids, turn = handed_in_with_a_pass(client, agent, MOVE)
    [result] = tool_results(turn)
    assert result["ok"] and result["result"].startswith(f"Archival memory {tokyo['id']} is superseded"), result
    assert result["result"].endswith(
        "Unknown reference 'm7' ignored: the fact is stored without it. A reference is the [m…] that begins a line of the transcript."
    )
    old = client.get(f"{base}/archival/{tokyo['id']}").json()
    osaka = client.get(f"{base}/archival/{old['superseded_by']}").json()
    assert (osaka["content"], osaka["sources"]) == (OSAKA, [ids[0]])
    assert old["sources"] == []  # the old fact keeps its own


def test_too_many_references_fail_the_call_and_unknown_ones_are_named(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    llm.reset(
        tools(
            create("The user has two cats.", *(f"m{i}" for i in range(1, 18))),  # more than a fact may cite
            create("The user likes tea.", "m1", "m2", "m3"),
        ),
        text("done"),
    )
    ids, turn = handed_in_with_a_pass(client, agent, [{"role": "user", "content": "I have two cats and I like tea."}])
    too_many, several_unknown = tool_results(turn)
    assert not too_many["ok"] and "sources" in too_many["result"] and "16" in too_many["result"], too_many
    assert several_unknown["ok"]
    assert "Unknown references 'm2', 'm3' ignored: the fact is stored without them." in several_unknown["result"]
    facts = {p["content"]: p["sources"] for p in client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]}
    assert facts == {"The user likes tea.": ids}


def test_a_reference_of_other_digits_names_no_line(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    # "²" and "١" are digits to str.isdigit(); a line's number is written in ASCII digits, as its reference is.
    llm.reset(tools(create("The user likes tea.", "²", "١", "1")), text("done"))
    ids, turn = handed_in_with_a_pass(client, agent, [{"role": "user", "content": "I like tea."}])
    assert (turn["status"], turn["stop_reason"]) == ("completed", "end_turn")
    [result] = tool_results(turn)
    assert result["ok"] and "Unknown references '²', '١' ignored" in result["result"], result
    facts = {p["content"]: p["sources"] for p in client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]}
    assert facts == {"The user likes tea.": ids}


def test_a_chat_turns_agent_stores_facts_without_references(client: TestClient, agent: dict, llm: ScriptedLLM) -> None:
    # The agent in a turn has no references in its context: its tool takes none, and what it stores cites nothing.
    llm.reset(
        tools(call("archival_memory_create", content="The user likes green tea.")),
        tools(call("send_message", text="Noted.")),
    )
    chat(client, agent, "I like green tea.")
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["tools"]}
    assert set(offered["archival_memory_create"]["parameters"]["properties"]) == {"content", "tags", "occurred_at"}
    assert set(offered["archival_memory_supersede"]["parameters"]["properties"]) == {"passage_id", "content"}
    [fact] = client.get(f"/v1/agents/{agent['id']}/archival").json()["items"]
    assert (fact["content"], fact["sources"]) == ("The user likes green tea.", [])
