"""A LangGraph StateGraph over EngramStore and recollection_hook against a served Engram, its model the scripted LLM
through the openai package: what one run stored in the store, a later run's model is handed (the recorded request)."""

from typing import Any

from engram_client import Engram
from engram_client.langgraph import EngramStore, recollection_hook
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, convert_to_openai_messages
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from openai import OpenAI

from testkit.scripted_llm import ScriptedLLM, text
from tests.clients.python.conftest import unique


class State(MessagesState):
    llm_input_messages: list[AnyMessage]  # what the hook hands the model


def graph(llm: ScriptedLLM, store: EngramStore, user: str) -> CompiledStateGraph[Any]:
    model = OpenAI(base_url=llm.url, api_key="scripted")

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        said = state["messages"][-1]
        store.put((user, "said"), str(said.id), {"text": said.text})
        return {}

    def answer(state: State) -> dict[str, Any]:
        prompt: Any = convert_to_openai_messages(state["llm_input_messages"])
        reply = model.chat.completions.create(model="scripted", messages=prompt).choices[0].message.content
        return {"messages": [AIMessage(reply or "")]}

    builder = StateGraph(State).add_node(remember).add_node("recollect", recollection_hook(user, store=store))
    builder.add_node(answer).add_edge(START, "remember").add_edge("remember", "recollect").add_edge("recollect", "answer")
    return builder.compile(store=store)


def test_a_later_run_is_handed_what_an_earlier_one_stored(engram: Engram, llm: ScriptedLLM) -> None:
    store, user = EngramStore(client=engram), unique("graph user")
    bot = graph(llm, store, user)
    try:
        llm.reset(text("Happy early birthday, Mochi!"))
        first = bot.invoke({"messages": [HumanMessage("My cat Mochi turns three on 12 May.")]})
        assert first["messages"][-1].content == "Happy early birthday, Mochi!"
        assert [m["role"] for m in llm.requests[0]["messages"]] == ["user"]  # memory held nothing for it
        [kept] = store.search((user, "said"))
        assert kept.value == {"text": "My cat Mochi turns three on 12 May."}

        llm.reset(text("On 12 May."))
        later = bot.invoke({"messages": [HumanMessage("When is Mochi's birthday?")]})  # a new thread
        assert later["messages"][-1].content == "On 12 May."
        [system, question] = llm.requests[0]["messages"]
        assert system["role"] == "system" and "My cat Mochi turns three on 12 May." in system["content"]
        assert question == {"role": "user", "content": "When is Mochi's birthday?"}
        assert not any(isinstance(m, SystemMessage) for m in later["messages"])  # the state's messages as they were
    finally:
        if (created := engram.agents.find(user)) is not None:
            engram.agents.delete(created.id)


async def test_the_hook_awaited_for_a_user_named_by_the_runs_config(engram: Engram, llm: ScriptedLLM) -> None:
    store, user = EngramStore(client=engram), unique("config user")
    hook = recollection_hook(lambda config: config["configurable"]["user_id"], store=store)
    try:
        said = [HumanMessage("Where does Aiko live?")]
        nobody = await hook.ainvoke({"messages": said}, {"configurable": {"user_id": user}})
        assert nobody == {"llm_input_messages": said}  # no agent yet: no memory
        await store.aput((user, "facts"), "home", {"text": "Aiko lives in Osaka."})
        found = await hook.ainvoke({"messages": said}, {"configurable": {"user_id": user}})
        [memory, question] = found["llm_input_messages"]
        assert isinstance(memory, SystemMessage) and "Aiko lives in Osaka." in memory.text and question == said[0]
    finally:
        if (created := engram.agents.find(user)) is not None:
            engram.agents.delete(created.id)
