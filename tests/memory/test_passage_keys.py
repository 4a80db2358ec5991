"""Passage keys: `PUT …/archival/keys/{key}` stores a passage under the caller's key or supersedes the one it holds
(history kept as supersede keeps it), the same passage again adds no version, `GET` reads the current one and `DELETE`
erases the key with its versions; `key` on POST …/archival (409 when taken), read back everywhere; bad keys are 422s,
unknown ones 404s; one agent's key is not another's; concurrent first writes of one key store it once. Export and
import: tests/portability/test_portability_keys.py."""

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi.testclient import TestClient
from httpx2 import Response


def keys(agent: dict) -> str:
    return f"/v1/agents/{agent['id']}/archival/keys"


def put(client: TestClient, agent: dict, key: str, content: str, status: int, **fields: Any) -> dict[str, Any]:
    response = client.put(f"{keys(agent)}/{key}", json={"content": content, **fields})
    assert response.status_code == status, response.text
    passage: dict[str, Any] = response.json()
    return passage


def versions(client: TestClient, agent: dict, key: str) -> list[dict[str, Any]]:
    """Every passage of the agent under `key`, current and superseded, newest first."""
    listed = client.get(f"/v1/agents/{agent['id']}/archival", params={"include_superseded": True, "limit": 200})
    assert listed.status_code == 200, listed.text
    return [p for p in listed.json()["items"] if p["key"] == key]


def current(client: TestClient, agent: dict, key: str) -> dict[str, Any] | None:
    response = client.get(f"{keys(agent)}/{key}")
    assert response.status_code in (200, 404), response.text
    return response.json() if response.status_code == 200 else None


def error(response: Response, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "detail"} and response.json()["error"] == code, response.json()
    for word in words:
        assert word in response.json()["detail"], (word, response.json())


def test_put_stores_a_passage_under_its_key_and_every_read_shows_the_key(client: TestClient, agent: dict) -> None:
    stored = put(client, agent, "prefs:drink", "The user drinks green tea", 201, tags=["Food"], occurred_at="2024-05-01")
    assert stored["key"] == "prefs:drink" and stored["duplicate"] is False
    assert (stored["content"], stored["tags"], stored["occurred_at"][:10]) == (
        "The user drinks green tea",
        ["food"],
        "2024-05-01",
    )
    assert current(client, agent, "prefs:drink") == {**stored, "duplicate": None}
    base = f"/v1/agents/{agent['id']}/archival"
    assert client.get(f"{base}/{stored['id']}").json()["key"] == "prefs:drink"
    assert [p["key"] for p in client.get(base).json()["items"]] == ["prefs:drink"]
    [hit] = client.get(base, params={"query": "green tea"}).json()["items"]
    assert (hit["id"], hit["key"]) == (stored["id"], "prefs:drink")
    plain = client.post(base, json={"content": "The user walks to work"}).json()
    assert plain["key"] is None
    longest = "k" * 200  # the longest key, of every character a key may hold
    for key in (longest, "A-z_0.9~:@x", "_underscore", "-dash", "~tilde"):
        assert put(client, agent, key, f"stored under {key[:20]}", 201)["key"] == key


def test_put_again_supersedes_and_keeps_the_history(client: TestClient, agent: dict) -> None:
    first = put(client, agent, "home", "The user lives in Tokyo", 201, tags=["place"], occurred_at="2023-01-01")
    second = put(client, agent, "home", "The user lives in Osaka", 200, occurred_at="2024-10-01")
    assert second["id"] != first["id"] and second["key"] == "home" and second["duplicate"] is False
    assert second["tags"] == []  # the body's tags, not the old passage's: a PUT is the whole passage
    assert current(client, agent, "home") == {**second, "duplicate": None}
    old = client.get(f"/v1/agents/{agent['id']}/archival/{first['id']}").json()
    assert (old["superseded_by"], old["valid_until"][:10], old["key"]) == (second["id"], "2024-10-01", "home")
    assert [(p["content"], p["superseded_by"]) for p in versions(client, agent, "home")] == [
        ("The user lives in Osaka", None),
        ("The user lives in Tokyo", second["id"]),
    ]
    base = f"/v1/agents/{agent['id']}/archival"
    assert [p["id"] for p in client.get(base).json()["items"]] == [second["id"]]  # current passages only
    then = client.get(base, params={"as_of": "2024-06-30"}).json()["items"]
    assert [p["content"] for p in then] == ["The user lives in Tokyo"]
    third = put(client, agent, "home", "The user lives in Kyoto", 200)
    assert [p["id"] for p in versions(client, agent, "home")] == [third["id"], second["id"], first["id"]]
    # POST …/supersede of a keyed passage passes the key on, as PUT does
    fourth = client.post(f"{base}/{third['id']}/supersede", json={"content": "The user lives in Nara"})
    assert fourth.status_code == 201 and fourth.json()["key"] == "home", fourth.text
    assert current(client, agent, "home") == {**fourth.json(), "duplicate": None}
    assert client.get(f"{base}/{third['id']}").json()["key"] == "home"


def test_the_same_passage_again_adds_no_version(client: TestClient, agent: dict) -> None:
    body = {"tags": ["pets"], "occurred_at": "2024-05-01T09:00:00Z"}
    stored = put(client, agent, "pet", "The user has a cat, Mochi", 201, **body)
    again = put(client, agent, "pet", "The user has a cat, Mochi", 200, **body)
    assert again == {**stored, "duplicate": True}
    undated = put(client, agent, "pet", "The user has a cat, Mochi", 200, tags=["pets"])  # no date: any date will do
    assert undated["id"] == stored["id"] and undated["duplicate"] is True
    assert len(versions(client, agent, "pet")) == 1
    # another text (exactly: a key's value reads back as written), other tags or another date: a new version
    recased = put(client, agent, "pet", "the user has a cat, mochi", 200, **body)
    retagged = put(client, agent, "pet", "the user has a cat, mochi", 200, occurred_at=body["occurred_at"])
    redated = put(client, agent, "pet", "the user has a cat, mochi", 200, occurred_at="2024-06-01")
    assert len({stored["id"], recased["id"], retagged["id"], redated["id"]}) == 4
    assert not any(p["duplicate"] for p in (recased, retagged, redated))
    assert len(versions(client, agent, "pet")) == 4


def test_keyed_passages_are_never_taken_for_near_duplicates(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    plain = client.post(base, json={"content": "The user likes hiking"}).json()
    keyed = put(client, agent, "hobby", "The user likes hiking", 201)
    assert keyed["id"] != plain["id"]  # the key's own passage, not the unkeyed one
    other = put(client, agent, "hobby-2", "The user likes hiking!", 201)
    assert other["id"] not in (plain["id"], keyed["id"])
    repeated = client.post(base, json={"content": "the user likes hiking"})
    assert repeated.status_code == 200 and repeated.json()["id"] == plain["id"]  # an unkeyed one's duplicate


def test_post_takes_a_key_and_a_taken_one_is_409_naming_the_passage(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    created = client.post(base, json={"content": "The user's birthday is 3 March", "key": "birthday"})
    assert created.status_code == 201 and created.json()["key"] == "birthday", created.text
    taken = client.post(base, json={"content": "The user's birthday is 4 March", "key": "birthday"})
    error(taken, 409, "key_taken", "'birthday'", created.json()["id"], "PUT")
    batch = client.post(f"{base}/batch", json={"items": [{"content": "a", "key": "fresh"}, {"content": "b", "key": "birthday"}]})
    error(batch, 409, "key_taken", "'birthday'")
    twice = client.post(f"{base}/batch", json={"items": [{"content": "a", "key": "twice"}, {"content": "b", "key": "twice"}]})
    error(twice, 422, "invalid_request", "'twice'", "more than one")
    assert [p["id"] for p in client.get(base).json()["items"]] == [created.json()["id"]]  # nothing else stored
    keyed = client.post(f"{base}/batch", json={"items": [{"content": "first", "key": "b-1"}, {"content": "second"}]})
    assert [p["key"] for p in keyed.json()["items"]] == ["b-1", None]
    # once superseded, the key's current passage is the new one: taken all the same
    put(client, agent, "birthday", "The user's birthday is 5 March", 200)
    error(client.post(base, json={"content": "x", "key": "birthday"}), 409, "key_taken")


def test_bad_keys_are_422_and_nothing_is_stored(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    for bad in ("k" * 201, ".hidden", "a+b", "a%20b", "caf%C3%A9", "a%3Fb", "a,b", "%2E%2E"):
        for method in ("PUT", "GET", "DELETE"):
            response = client.request(method, f"{keys(agent)}/{bad}", json={"content": "x"} if method == "PUT" else None)
            error(response, 422, "invalid_request", "key")
    for bad_key in ("", "k" * 201, "a/b", ".x", "é", " padded ", 7):
        error(client.post(base, json={"content": "x", "key": bad_key}), 422, "invalid_request", "key")
        error(client.post(f"{base}/batch", json={"items": [{"content": "x", "key": bad_key}]}), 422, "invalid_request", "key")
    # the key of a PUT is its path's; an import job's lines take none
    error(client.put(f"{keys(agent)}/k", json={"content": "x", "key": "other"}), 422, "invalid_request", "key")
    imported = client.post(
        f"{base}/import", content=b'{"content": "x", "key": "k"}\n', headers={"Content-Type": "application/x-ndjson"}
    )
    error(imported, 422, "invalid_request", "line 1", "key")
    error(client.put(f"{keys(agent)}/k", json={"content": "   "}), 422, "invalid_request", "content")
    assert client.get(base, params={"include_superseded": True}).json()["items"] == []


def test_unknown_keys_and_agents_are_404(client: TestClient, agent: dict) -> None:
    error(client.get(f"{keys(agent)}/nothing"), 404, "not_found", "'nothing'")
    error(client.delete(f"{keys(agent)}/nothing"), 404, "not_found", "'nothing'")
    nobody = {"id": "00000000-0000-4000-8000-000000000000"}
    for method in ("PUT", "GET", "DELETE"):
        response = client.request(method, f"{keys(nobody)}/k", json={"content": "x"} if method == "PUT" else None)
        error(response, 404, "not_found")


def test_delete_erases_the_key_with_its_versions_and_what_was_drawn_from_them(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    first = put(client, agent, "job", "The user is a nurse", 201)
    second = put(client, agent, "job", "The user is a doctor", 200)
    drawn = client.post(base, json={"content": "The user works at a hospital", "sources": [second["id"]]}).json()
    also = client.post(base, json={"content": "The user is a doctor who cycles", "sources": [second["id"], drawn["id"]]})
    kept = client.post(base, json={"content": "The user studied medicine in Kyoto"}).json()
    deleted = client.delete(f"{keys(agent)}/job")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {
        "id": second["id"],
        "erased_passages": [first["id"], drawn["id"], also.json()["id"]],
        "sources_trimmed": 0,
    }
    assert current(client, agent, "job") is None and versions(client, agent, "job") == []
    for gone in (first, second, drawn):
        assert client.get(f"{base}/{gone['id']}").status_code == 404
    assert [p["id"] for p in client.get(base, params={"include_superseded": True}).json()["items"]] == [kept["id"]]
    assert put(client, agent, "job", "The user is a teacher", 201)["key"] == "job"  # the key is free again


def test_deleting_a_version_by_id_leaves_one_current_passage_under_the_key(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    first = put(client, agent, "city", "The user lives in Sendai", 201)
    second = put(client, agent, "city", "The user lives in Fukuoka", 200)
    assert client.delete(f"{base}/{second['id']}").status_code == 200
    assert current(client, agent, "city") == {**client.get(f"{base}/{first['id']}").json(), "duplicate": None}
    city = current(client, agent, "city")
    assert city is not None and city["id"] == first["id"]
    third = put(client, agent, "city", "The user lives in Kobe", 200)
    assert client.get(f"{base}/{first['id']}").json()["superseded_by"] == third["id"]

    # Versions erased from the middle of the history (drawn from a message forgotten): the latest version left is
    # current, and those before it superseded by it; one key, one current passage.
    [said] = client.post(
        f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": "I moved"}]}
    ).json()["message_ids"]
    v = [put(client, agent, "town", "Town 1", 201)]
    v.append(put(client, agent, "town", "Town 2", 200, sources=[said]))
    v.append(put(client, agent, "town", "Town 3", 200))
    v.append(put(client, agent, "town", "Town 4", 200, sources=[said]))
    assert client.delete(f"/v1/agents/{agent['id']}/messages/{said}").status_code == 200
    assert [(p["content"], p["superseded_by"]) for p in versions(client, agent, "town")] == [
        ("Town 3", None),
        ("Town 1", v[2]["id"]),
    ]
    # ...and when a later version stays, those before the erased one are superseded by the key's current passage
    [said] = client.post(f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": "Again"}]}).json()[
        "message_ids"
    ]
    w = [put(client, agent, "street", "Street 1", 201)]
    w.append(put(client, agent, "street", "Street 2", 200, sources=[said]))
    w.append(put(client, agent, "street", "Street 3", 200))
    assert client.delete(f"/v1/agents/{agent['id']}/messages/{said}").status_code == 200
    assert [(p["content"], p["superseded_by"]) for p in versions(client, agent, "street")] == [
        ("Street 3", None),
        ("Street 1", w[2]["id"]),
    ]


def test_another_agents_same_key_is_its_own(client: TestClient, agent: dict) -> None:
    other = client.post("/v1/agents", json={"name": f"{agent['name']} (other)"}).json()
    mine = put(client, agent, "shared-name", "Mine", 201)
    theirs = put(client, other, "shared-name", "Theirs", 201)
    assert current(client, agent, "shared-name") == {**mine, "duplicate": None}
    assert current(client, other, "shared-name") == {**theirs, "duplicate": None}
    assert put(client, agent, "shared-name", "Mine, again", 200)["key"] == "shared-name"
    assert client.delete(f"{keys(agent)}/shared-name").status_code == 200
    assert current(client, agent, "shared-name") is None
    assert current(client, other, "shared-name") == {**theirs, "duplicate": None}
    assert client.get(f"/v1/agents/{agent['id']}/archival/{theirs['id']}").status_code == 404
    client.delete(f"/v1/agents/{other['id']}")


def at_once(count: int, request: Callable[[int], Response]) -> list[Response]:
    """`count` requests sent together (each waits until all are ready)."""
    ready = threading.Barrier(count)

    def send(i: int) -> Response:
        ready.wait()
        return request(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(send, range(count)))


def test_concurrent_puts_of_one_new_key_store_it_once(client: TestClient, agent: dict) -> None:
    answers = at_once(6, lambda i: client.put(f"{keys(agent)}/race", json={"content": f"Version {i}"}))
    assert sorted(a.status_code for a in answers) == [200] * 5 + [201], [a.text for a in answers]
    stored = versions(client, agent, "race")
    assert len(stored) == 6 and [p["superseded_by"] for p in stored].count(None) == 1
    successors = {p["superseded_by"] for p in stored} - {None}
    assert len(successors) == 5 and successors <= {p["id"] for p in stored}  # one line of versions, no fork

    same = at_once(4, lambda i: client.put(f"{keys(agent)}/same", json={"content": "One text"}))
    assert sorted(a.status_code for a in same) == [200, 200, 200, 201]
    assert len({a.json()["id"] for a in same}) == 1 and len(versions(client, agent, "same")) == 1

    base = f"/v1/agents/{agent['id']}/archival"
    posted = at_once(4, lambda i: client.post(base, json={"content": f"Posted {i}", "key": "posted"}))
    assert sorted(a.status_code for a in posted) == [201, 409, 409, 409]
    assert len(versions(client, agent, "posted")) == 1
