"""Passage keys in the export document: exported with every version of a key, kept by an import (the current
passage under the key, the earlier ones superseded with it); two current passages under one key, or a key a PUT could
not name, are a 422."""

from fastapi.testclient import TestClient

from tests.memory.test_passage_keys import current, error, put, versions
from tests.support.portability import settled_export, unique_name


def test_export_and_import_keep_keys_and_their_history(client: TestClient, agent: dict) -> None:
    put(client, agent, "diet", "The user is vegetarian", 201)
    newest = put(client, agent, "diet", "The user is vegan", 200)
    document = settled_export(client, agent["id"])
    assert sorted((p["content"], p["key"]) for p in document["passages"]) == [
        ("The user is vegan", "diet"),
        ("The user is vegetarian", "diet"),
    ]
    imported = client.post("/v1/agents/import", json=document, params={"name": unique_name()})
    assert imported.status_code == 201, imported.text
    copy = imported.json()["agent"]
    read = current(client, copy, "diet")
    assert read is not None and read["content"] == "The user is vegan" and read["id"] != newest["id"]
    assert [(p["content"], p["superseded_by"]) for p in versions(client, copy, "diet")] == [
        ("The user is vegan", None),
        ("The user is vegetarian", read["id"]),
    ]
    assert put(client, copy, "diet", "The user eats fish again", 200)["key"] == "diet"

    # two current passages under one key cannot be imported (nor a key that could not be PUT)
    current_twice = {**document, "passages": [{**p, "superseded_by": None, "valid_until": None} for p in document["passages"]]}
    for bad, words in (
        (current_twice, ("both current", "'diet'")),
        ({**document, "passages": [{**document["passages"][0], "key": "a/b"}]}, ("key",)),
    ):
        error(client.post("/v1/agents/import", json=bad, params={"name": unique_name()}), 422, "invalid_request", *words)
    client.delete(f"/v1/agents/{copy['id']}")
