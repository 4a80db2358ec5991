"""The pre-model hook: the agent's memory for the latest human message, put first in what the model is handed."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from engram_client._core import Flow
from engram_client._frameworks import Role, recollection
from engram_client.langgraph._store import EngramStore

ROLES: dict[str, Role] = {"human": "user", "ai": "assistant"}
ModelInput = dict[str, list[AnyMessage]]


def recollection_hook(
    agent: str | Callable[[RunnableConfig], str], *, store: EngramStore | None = None, max_chars: int | None = None
) -> RunnableLambda[Any, ModelInput]:
    """A pre-model hook (`create_react_agent(..., pre_model_hook=...)`, or a node of your graph) that recollects, for
    the latest human message of the state's `messages`, what the agent's memory holds (core memory and what bears on
    it, within `max_chars`, default 1,500) and answers `{"llm_input_messages": [SystemMessage(memory), *messages]}`
    (the messages alone while memory holds nothing about it): the model is handed it, the state's messages stay as
    they are. `agent` names the agent as a store's namespace does (its id or its name), or is a function of the run's
    config (`lambda config: config["configurable"]["user_id"]`); an agent not found has no memory yet. `store`: the
    EngramStore whose clients it uses (default: a new one)."""
    memory = store or EngramStore()

    def model_input(state: Any, config: RunnableConfig) -> Flow[ModelInput]:
        messages: Sequence[AnyMessage] = state["messages"] if isinstance(state, Mapping) else state.messages
        agent_id = yield from memory.agent_id(agent(config) if callable(agent) else agent)
        said = [(ROLES[m.type], m.text) for m in messages if isinstance(m, BaseMessage) and m.type in ROLES]
        text = (yield from recollection(agent_id, said, max_chars=max_chars)) if agent_id is not None else ""
        return {"llm_input_messages": [SystemMessage(text), *messages] if text else list(messages)}

    def hook(state: Any, config: RunnableConfig) -> ModelInput:
        return memory.client._runner.run(model_input(state, config))

    async def ahook(state: Any, config: RunnableConfig) -> ModelInput:
        return await memory.aclient._runner.run(model_input(state, config))

    return RunnableLambda(hook, afunc=ahook, name="engram_recollection")
