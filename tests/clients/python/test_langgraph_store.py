"""EngramStore (engram_client.langgraph) against a served Engram: LangGraph's store calls put, get, search (by query,
by filter, by namespace), delete and list_namespaces, blocking and awaited; each item an archival passage under its
key, in the agent its namespace names."""

from typing import Any

import pytest
from engram_client import Engram, InvalidRequest
from engram_client.langgraph import EngramStore
from engram_client.langgraph._codec import engram_key, path_and_key
from langgraph.store.base import InvalidNamespaceError, Item

from tests.clients.python.conftest import unique

TEA = {"text": "Aiko drinks green tea, never coffee."}
MATCHA = {"text": "Aiko loves matcha ice cream.", "since": 2019, "likes": ["sweet", "cold"]}
KYOTO = {"plan": "Tea ceremony in Kyoto", "day": "Friday", "rating": 5}


def value(item: Item | None) -> dict[str, Any]:
    """The value of an item the store has (none fails the test)."""
    assert item is not None
    return item.value


def test_a_key_is_the_namespace_after_the_agent_and_the_items_key() -> None:
    assert engram_key(("prefs",), "drink") == "prefs:drink"
    assert engram_key(("trips", "2024"), "kyoto/tea ceremony") == "trips:2024:kyoto~2Ftea~20ceremony"
    assert engram_key((), ".hidden:k~y") == "~2Ehidden~3Ak~7Ey"  # a leading dot, the separator, the escape
    assert engram_key(("料理",), "é") == "~E6~96~99~E7~90~86:~C3~A9"
    for path, key in [(("prefs",), "drink"), (("a", "b"), "c:d/e ~f"), ((), ".x"), (("料理",), "é")]:
        assert path_and_key(engram_key(path, key)) == (path, key)
    assert path_and_key("notes~zz") is None  # a key the store would not write is not one of its items


def test_items_are_put_read_searched_listed_and_deleted(engram: Engram) -> None:
    store, name = EngramStore(client=engram), unique("store")
    prefs, trips = (name, "prefs"), (name, "trips", "2024")
    try:
        store.put(prefs, "drink", TEA)
        store.put(prefs, "food", MATCHA)
        store.put(trips, "kyoto/tea ceremony", KYOTO)
        drink = store.get(prefs, "drink")
        assert drink is not None and (drink.namespace, drink.key, drink.value) == (prefs, "drink", TEA)
        assert value(store.get(trips, "kyoto/tea ceremony")) == KYOTO

        agent = engram.agents.find(name)  # created by the first put, named by the namespace
        assert agent is not None
        tea = engram.archival.get_key(agent.id, "prefs:drink")
        assert (tea.content, tea.tags) == (TEA["text"], ["prefs"])  # the text as it is, for Engram's search
        kyoto = engram.archival.get_key(agent.id, "trips:2024:kyoto~2Ftea~20ceremony")
        assert (kyoto.tags, kyoto.content) == (["trips", "2024"], '{"plan":"Tea ceremony in Kyoto","day":"Friday","rating":5}')

        store.put(prefs, "drink", {"text": "Aiko drinks coffee now."})  # supersedes: the earlier value is kept
        assert value(store.get(prefs, "drink")) == {"text": "Aiko drinks coffee now."}
        history = engram.archival.list(agent.id, include_superseded=True).items
        assert sorted(p.content for p in history if p.key == "prefs:drink") == ["Aiko drinks coffee now.", TEA["text"]]
        assert value(store.get((str(agent.id), "prefs"), "food")) == MATCHA  # by id too

        [best, *_] = store.search((name,), query="What does Aiko drink?")
        assert (best.namespace, best.key, best.value) == (prefs, "drink", {"text": "Aiko drinks coffee now."})
        assert best.score is not None and best.score > 0
        assert [i.key for i in store.search((name,), query="ice cream", filter={"likes": ["sweet", "cold"]})] == ["food"]
        assert [i.key for i in store.search((name, "prefs"), filter={"since": {"$gte": 2019}})] == ["food"]
        assert [i.key for i in store.search(trips, filter={"rating": {"$gt": 4}, "day": "Friday"})] == ["kyoto/tea ceremony"]
        assert [i.key for i in store.search((name,))] == ["drink", "kyoto/tea ceremony", "food"]  # newest first
        assert [i.key for i in store.search((name,), limit=1, offset=1)] == ["kyoto/tea ceremony"]

        assert store.list_namespaces(prefix=(name,)) == [prefs, trips]
        assert store.list_namespaces(prefix=(name,), max_depth=2) == [prefs, (name, "trips")]
        assert store.list_namespaces(prefix=(name, "*", "2024")) == [trips]
        assert trips in store.list_namespaces(suffix=("trips", "2024"), limit=1000)  # every agent's

        store.delete(prefs, "drink")  # the key's value and its history erased
        assert store.get(prefs, "drink") is None
        assert [p.key for p in engram.archival.list(agent.id, include_superseded=True).items if p.key == "prefs:drink"] == []
        store.delete(prefs, "drink")  # nothing to delete: nothing happens
        assert [i.key for i in store.search((name,))] == ["kyoto/tea ceremony", "food"]

        for key, too_much in [("k" * 196, TEA), ("long", {"text": "x" * 20_001})]:  # prefs:k… is 202 characters
            with pytest.raises(InvalidRequest):
                store.put(prefs, key, too_much)
    finally:
        if (created := engram.agents.find(name)) is not None:
            engram.agents.delete(created.id)


def test_reads_of_an_agent_nobody_named_find_nothing_and_create_nothing(engram: Engram) -> None:
    store, name = EngramStore(client=engram), unique("nobody")
    assert store.get((name, "prefs"), "drink") is None
    assert store.search((name,), query="anything") == [] and store.list_namespaces(prefix=(name,)) == []
    store.delete((name,), "drink")
    assert engram.agents.find(name) is None
    with pytest.raises(InvalidNamespaceError):
        store.put(("Aiko v1.2",), "drink", TEA)  # LangGraph's rule: a label holds no dot


async def test_the_store_awaited(engram: Engram) -> None:
    store, name = EngramStore(client=engram), unique("async store")  # its AsyncEngram: for the same service
    try:
        await store.aput((name, "prefs"), "drink", TEA)
        assert value(await store.aget((name, "prefs"), "drink")) == TEA
        [found] = await store.asearch((name,), query="green tea")
        assert found.key == "drink" and await store.alist_namespaces(prefix=(name,)) == [(name, "prefs")]
        await store.adelete((name, "prefs"), "drink")
        assert await store.aget((name, "prefs"), "drink") is None
    finally:
        if (created := engram.agents.find(name)) is not None:
            engram.agents.delete(created.id)
