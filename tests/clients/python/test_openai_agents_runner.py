"""The OpenAI Agents SDK's Runner over EngramSession, memory_instructions and memory_tools, its model the scripted
LLM through the SDK's own OpenAI client: a second session answers from what the first stored, and the model is seen
to be handed it (the recorded request)."""

from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, SessionSettings
from engram_client import Agent as EngramAgent
from engram_client import AsyncEngram
from engram_client.openai_agents import EngramSession, memory_instructions, memory_tools
from openai import AsyncOpenAI

from testkit.scripted_llm import ScriptedLLM, call, text, tools

UNTRACED = RunConfig(tracing_disabled=True)  # the SDK would send traces to OpenAI


def assistant(llm: ScriptedLLM, agent_id: Any, client: AsyncEngram) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(model="scripted", openai_client=AsyncOpenAI(base_url=llm.url, api_key="scripted"))
    return Agent(
        name="Aiko's assistant",
        instructions=memory_instructions("You are Aiko's assistant.", agent_id, client=client),
        model=model,
        tools=memory_tools(agent_id, client=client),
    )


async def test_a_second_session_answers_from_what_the_first_stored(
    aengram: AsyncEngram, agent: EngramAgent, llm: ScriptedLLM
) -> None:
    bot = assistant(llm, agent.id, aengram)
    llm.reset(
        tools(call("remember", fact="Aiko's cat Mochi turns three on 12 May.")),
        text("Noted: Mochi's birthday is 12 May."),
        text("Good luck with the move!"),
    )
    first = EngramSession(agent.id, client=aengram)
    noted = await Runner.run(bot, "My cat Mochi turns three on 12 May.", session=first, run_config=UNTRACED)
    assert noted.final_output == "Noted: Mochi's birthday is 12 May."
    await Runner.run(bot, "来月、大阪に引っ越します。", session=first, run_config=UNTRACED)
    assert "Mochi" not in llm.requests[0]["messages"][0]["content"]  # memory held nothing yet
    stored = await first.get_items(limit=None)
    assert stored[:4] == [  # the tool call and its output as the SDK gave them, the messages as they were said
        {"role": "user", "content": "My cat Mochi turns three on 12 May."},
        *[item for item in noted.to_input_list() if item.get("type") in ("function_call", "function_call_output")],
        {"role": "assistant", "content": "Noted: Mochi's birthday is 12 May."},
    ]
    assert [p.content for p in (await aengram.archival.list(agent.id)).items] == ["Aiko's cat Mochi turns three on 12 May."]

    # Another session (a later process): the runner reads its two latest items; Mochi is older, and comes from memory
    llm.reset(text("Mochi turns three on 12 May."))
    second = EngramSession(agent.id, client=aengram, session_settings=SessionSettings(limit=2))
    answer = await Runner.run(bot, "When is Mochi's birthday?", session=second, run_config=UNTRACED)
    assert answer.final_output == "Mochi turns three on 12 May."
    [request] = llm.requests
    system, *conversation = request["messages"]
    assert system["role"] == "system" and system["content"].startswith("You are Aiko's assistant.\n\n")
    assert "Aiko's cat Mochi turns three on 12 May." in system["content"]  # recollected: the fact remembered
    assert [(m["role"], m["content"]) for m in conversation] == [
        ("user", "来月、大阪に引っ越します。"),
        ("assistant", "Good luck with the move!"),
        ("user", "When is Mochi's birthday?"),
    ]
    assert (await second.get_items(limit=2)) == [
        {"role": "user", "content": "When is Mochi's birthday?"},
        {"role": "assistant", "content": "Mochi turns three on 12 May."},
    ]


async def test_the_recall_tool_searches_memory(aengram: AsyncEngram, agent: EngramAgent, llm: ScriptedLLM) -> None:
    await aengram.archival.add(agent.id, "Aiko's sister Yuki is a nurse in Sapporo.")
    llm.reset(tools(call("recall", query="Yuki's job")), text("Yuki is a nurse."))
    result = await Runner.run(assistant(llm, agent.id, aengram), "What does my sister do?", run_config=UNTRACED)
    assert result.final_output == "Yuki is a nurse."
    [tool_result] = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "Aiko's sister Yuki is a nurse in Sapporo." in tool_result
    assert "Yuki" in llm.requests[0]["messages"][0]["content"]  # the instructions had it too, without a session
