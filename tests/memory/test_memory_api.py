from fastapi.testclient import TestClient


def block_path(agent: dict, label: str) -> str:
    return f"/v1/agents/{agent['id']}/memory/{label}"


def test_put_block_versions_and_history(client: TestClient, agent: dict) -> None:
    first = client.put(block_path(agent, "human"), json={"value": "名前: 太郎"}, headers={"If-Match": "1"})
    assert first.status_code == 200, first.text
    assert first.json()["version"] == 2 and first.headers["etag"] == '"2"'
    second = client.put(block_path(agent, "human"), json={"value": "名前: 次郎"}, headers={"If-Match": '"2"'})
    assert second.json()["version"] == 3
    history = client.get(block_path(agent, "human") + "/history").json()["items"]
    assert [(r["version"], r["value"], r["source"]) for r in history] == [
        (3, "名前: 次郎", "api"),
        (2, "名前: 太郎", "api"),
        (1, "", "api"),
    ]
    memory = client.get(f"/v1/agents/{agent['id']}/memory").json()
    assert {b["label"]: b["value"] for b in memory["blocks"]}["human"] == "名前: 次郎"


def test_stale_if_match_is_412_and_changes_nothing(client: TestClient, agent: dict) -> None:
    client.put(block_path(agent, "human"), json={"value": "v2"})
    stale = client.put(block_path(agent, "human"), json={"value": "lost update"}, headers={"If-Match": "1"})
    assert stale.status_code == 412
    assert stale.json()["error"] == "precondition_failed"
    assert client.get(f"/v1/agents/{agent['id']}").json()["blocks"][0]["value"] == "v2"
    assert client.put(block_path(agent, "human"), json={"value": "x"}, headers={"If-Match": "abc"}).status_code == 422


CREATE = {"If-None-Match": "*"}


def test_put_creates_block_and_enforces_limit(client: TestClient, agent: dict) -> None:
    # A mistyped label is no new block: only If-None-Match: * creates one.
    typo = client.put(block_path(agent, "humna"), json={"value": "Name: Ken"})
    assert typo.status_code == 404 and "its blocks: human, persona" in typo.json()["detail"]
    assert "If-None-Match: *" in typo.json()["detail"]
    assert [b["label"] for b in client.get(f"/v1/agents/{agent['id']}/memory").json()["blocks"]] == ["human", "persona"]
    body = {"value": "Engram", "limit": 10, "description": "current work"}
    created = client.put(block_path(agent, "project"), json=body, headers=CREATE)
    assert created.status_code == 201
    again = client.put(block_path(agent, "project"), json={"value": "overwritten?"}, headers=CREATE)
    assert again.status_code == 412 and "exists already" in again.json()["detail"]
    assert client.put(block_path(agent, "other"), json={"value": "x"}, headers={"If-None-Match": '"3"'}).status_code == 422
    assert created.json() == {**created.json(), "label": "project", "limit": 10, "version": 1}
    over = client.put(block_path(agent, "project"), json={"value": "x" * 11})
    assert over.status_code == 422
    assert "limit of 10" in over.json()["detail"] and '"limit"' in over.json()["detail"]
    assert "core_memory_update" not in over.json()["detail"]  # an API caller has no agent tools
    raised = client.put(block_path(agent, "project"), json={"value": "x" * 11, "limit": 20})
    assert raised.status_code == 200 and raised.json()["limit"] == 20
    assert client.put(block_path(agent, "Bad-Label"), json={"value": "x"}, headers=CREATE).status_code == 422
    assert client.put(block_path(agent, "project"), json={"value": "x", "limit": 0}).status_code == 422


def test_archival_add_get_list_delete(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    one = client.post(base, json={"content": "The user likes green tea", "tags": ["Food", "drink"]})
    assert one.status_code == 201
    assert one.json()["tags"] == ["food", "drink"]
    batch = client.post(f"{base}/batch", json={"items": [{"content": f"note {i}"} for i in range(3)]})
    assert batch.status_code == 201 and len(batch.json()["items"]) == 3
    assert client.get(f"{base}/{one.json()['id']}").json()["content"] == "The user likes green tea"
    listed = client.get(base, params={"limit": 2})
    page1 = listed.json()
    assert len(page1["items"]) == 2 and page1["next_cursor"]
    page2 = client.get(base, params={"limit": 2, "cursor": page1["next_cursor"]}).json()
    assert len(page2["items"]) == 2 and page2["next_cursor"] is None
    assert {p["id"] for p in page1["items"] + page2["items"]} == {one.json()["id"], *(p["id"] for p in batch.json()["items"])}
    assert [p["id"] for p in client.get(base, params={"tags": "food"}).json()["items"]] == [one.json()["id"]]
    assert client.delete(f"{base}/{one.json()['id']}").json() == {
        "id": one.json()["id"],
        "erased_passages": [],
        "sources_trimmed": 0,
    }
    assert client.get(f"{base}/{one.json()['id']}").status_code == 404


def test_hybrid_search_ranks_relevant_passages_in_english_and_japanese(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    contents = [
        "ユーザーの好きな食べ物はラーメンです",
        "ユーザーは東京に住んでいる",
        "The user's sister is called Aiko and lives in Osaka",
        "The user plays tennis every Sunday morning",
        "The user is allergic to peanuts",
    ]
    client.post(f"{base}/batch", json={"items": [{"content": c} for c in contents]})
    for query, expected in [
        ("好きな食べ物は何ですか", contents[0]),
        ("ラーメン", contents[0]),
        ("東京", contents[1]),
        ("What is my sister's name?", contents[2]),
        ("Which sport do I play on weekends?", contents[3]),
        ("peanuts", contents[4]),
    ]:
        hits = client.get(base, params={"query": query, "k": 3}).json()["items"]
        assert hits[0]["content"] == expected, (query, [h["content"] for h in hits])
        assert 0 < hits[0]["score"] <= 1 and hits[0]["score"] >= hits[-1]["score"]


def test_search_filters_and_min_score(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    client.post(base, json={"content": "Coffee with oat milk every morning", "tags": ["habit"]})
    client.post(base, json={"content": "Coffee beans from Ethiopia are the favourite", "tags": ["taste"]})
    tagged = client.get(base, params={"query": "coffee", "tags": "taste"}).json()["items"]
    assert [h["content"] for h in tagged] == ["Coffee beans from Ethiopia are the favourite"]
    everything = client.get(base, params={"query": "coffee"}).json()["items"]
    assert len(everything) == 2
    ranked = client.get(base, params={"query": "Ethiopian coffee beans"}).json()["items"]
    assert ranked[0]["score"] > ranked[1]["score"]
    strict = client.get(base, params={"query": "Ethiopian coffee beans", "min_score": ranked[0]["score"]}).json()["items"]
    assert [h["id"] for h in strict] == [ranked[0]["id"]]
    assert client.get(base, params={"query": "coffee", "before": "2000-01-01T00:00:00Z"}).json()["items"] == []


def test_agents_do_not_see_each_others_memory(client: TestClient, agent: dict) -> None:
    other = client.post("/v1/agents", json={"name": "other"}).json()
    passage = client.post(f"/v1/agents/{agent['id']}/archival", json={"content": "secret plan"}).json()
    assert client.get(f"/v1/agents/{other['id']}/archival/{passage['id']}").status_code == 404
    assert client.get(f"/v1/agents/{other['id']}/archival", params={"query": "secret plan"}).json()["items"] == []


def test_near_duplicates_are_detected_on_insert(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}/archival"
    original = client.post(base, json={"content": "The user lives in Tokyo."})
    assert original.status_code == 201 and original.json()["duplicate"] is False
    again = client.post(base, json={"content": "the user lives in tokyo"})
    assert again.status_code == 200
    assert again.json()["id"] == original.json()["id"] and again.json()["duplicate"] is True
    batch = client.post(
        f"{base}/batch",
        json={
            "items": [
                {"content": "Meeting with Bob on Monday"},
                {"content": "Meeting with Bob on Tuesday"},  # cosine 0.97 with Monday, but another fact
                {"content": "meeting with bob on monday!"},
                {"content": "ユーザーはラーメンが好き"},
                {"content": "ユーザーはラーメンが好き。"},
                {"content": "ユーザーはラーメンが嫌い"},
                {"content": "Alice owes Bob 20 dollars"},
                {"content": "Bob owes Alice 20 dollars"},  # the same words, cosine 0.997, the other way round
                {"content": "He lent her the car"},
                {"content": "She lent him the car"},  # differs only in function words
                {"content": "😀"},
                {"content": "😢"},  # no letter or digit in either, and yet not the same
            ]
        },
    ).json()["items"]
    assert [p["duplicate"] for p in batch] == [False, False, True, False, True, False, False, False, False, False, False, False]
    assert batch[2]["id"] == batch[0]["id"] and batch[4]["id"] == batch[3]["id"]
    assert len(client.get(base, params={"limit": 50}).json()["items"]) == 11


def test_an_old_version_can_be_restored(client: TestClient, agent: dict) -> None:
    path = block_path(agent, "human")
    client.put(path, json={"value": "Name: Taro"})
    client.put(path, json={"value": "Name: Jiro"})
    restored = client.put(path, json={"restore_version": 2}, headers={"If-Match": "3"})
    assert restored.status_code == 200
    assert (restored.json()["value"], restored.json()["version"]) == ("Name: Taro", 4)
    assert client.get(path + "/history").json()["items"][0] == {
        **client.get(path + "/history").json()["items"][0],
        "version": 4,
        "value": "Name: Taro",
    }
    assert client.put(path, json={"restore_version": 99}).status_code == 404
    assert client.put(path, json={"value": "x", "restore_version": 2}).status_code == 422
    assert client.put(path, json={}).status_code == 422


def test_an_agent_has_a_bounded_number_of_blocks(client: TestClient, agent: dict) -> None:
    for i in range(30):  # 2 default blocks + 30 = the maximum of 32
        assert client.put(block_path(agent, f"extra_{i}"), json={"value": "x"}, headers=CREATE).status_code == 201
    refused = client.put(block_path(agent, "one_too_many"), json={"value": "x"}, headers=CREATE)
    assert refused.status_code == 422 and "at most 32" in refused.json()["detail"]


def test_whitespace_alone_is_refused_never_stored_as_an_empty_memory(client: TestClient, agent: dict) -> None:
    base = f"/v1/agents/{agent['id']}"
    [stored] = client.post(f"{base}/archival/batch", json={"items": [{"content": "The user likes tea."}]}).json()["items"]
    for path, body in (
        ("/archival", {"content": " \n\t "}),
        ("/archival/batch", {"items": [{"content": "fine"}, {"content": "\u3000"}]}),
        (f"/archival/{stored['id']}/supersede", {"content": "  "}),
        ("/messages", {"messages": [{"role": "user", "content": "\n"}]}),
    ):
        response = client.post(base + path, json=body)
        assert response.status_code == 422, (path, response.text)
        assert "blank" in response.json()["detail"], path
    listed = client.get(f"{base}/archival").json()["items"]
    assert [p["content"] for p in listed] == ["The user likes tea."]
