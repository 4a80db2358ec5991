"""The admin console (/console) in a real browser: Debian's `chromium` driven by Playwright (never a downloaded
browser), against the service served for real by uvicorn on loopback, with the embedded PostgreSQL and the
scripted LLM. A failing test saves a screenshot of the page and prints its path.

`ENGRAM_CONSOLE_SCREENSHOTS=docs python -m pytest tests/e2e/test_console.py` also writes the README's screenshots."""

import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from app.api.console import FILES
from app.llm.embeddings import Embedder
from app.settings import Settings
from testkit.scripted_llm import ScriptedLLM, call, paused, tools
from tests.support import matched
from tests.support.served import Served
from tests.support.service import ADMIN_KEY, admin, scripted_settings

expect.set_options(timeout=15_000)
SCREENSHOTS = os.environ.get("ENGRAM_CONSOLE_SCREENSHOTS")


def served_settings(database_url: str, llm: ScriptedLLM, **extra: Any) -> Settings:
    # An LLM timeout long enough for a test to look at a turn the scripted LLM holds open.
    return scripted_settings(database_url, llm, llm_timeout_seconds=60, **extra)


@pytest.fixture(scope="module")
def service(database_url: str, llm: ScriptedLLM, embedder: Embedder) -> Iterator[Served]:
    with Served(served_settings(database_url, llm), embedder) as served:
        yield served


@pytest.fixture(scope="module")
def browser(database_url: str, keyed_database: str) -> Iterator[Browser]:
    # The databases first: their migrations call asyncio.run, which cannot run in a thread that Playwright's sync
    # API drives (it keeps an event loop running there while the browser is open).
    chromium = shutil.which("chromium")
    if chromium is None:
        message = "Debian's chromium is not installed: `apt-get install -y chromium` (.ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, timezone_id="UTC", locale="en-GB")
    opened = context.new_page()
    errors: list[str] = []
    console: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    failed_before = request.session.testsfailed
    yield opened
    # The call phase's report is counted before teardown, so a failure of this test shows here.
    if request.session.testsfailed > failed_before:
        path = Path(tempfile.mkdtemp(prefix="engram-console-")) / f"{request.node.name}.png"
        opened.screenshot(path=str(path), full_page=True)
        print(f"\nscreenshot of the failed page: {path}\nbrowser console:\n" + "\n".join(console))
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def keep(page: Page, name: str) -> None:
    """A screenshot for the README (only when ENGRAM_CONSOLE_SCREENSHOTS names a folder)."""
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / name))


def new_agent(api: httpx.Client, name: str, **spec: Any) -> dict:
    response = api.post("/v1/agents", json={"name": name, **spec})
    assert response.status_code == 201, response.text
    return response.json()


def open_agent(page: Page, base: str, agent: dict, view: str = "memory") -> None:
    page.goto(f"{base}/console/#/agents/{agent['id']}/{view}")
    expect(page.locator(".agent-head h2")).to_have_text(agent["name"])


def block(api: httpx.Client, agent: dict, label: str) -> dict:
    response = api.get(f"/v1/agents/{agent['id']}/memory")
    assert response.status_code == 200, response.text
    return next(b for b in response.json()["blocks"] if b["label"] == label)


def test_console_is_served_from_the_package_with_no_outside_reference(service: Served) -> None:
    with service.api() as api:
        root = api.get("/console")
        assert root.status_code == 308 and root.headers["location"] == "/console/"
        shell = api.get("/console/")
        assert shell.status_code == 200 and shell.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in shell.headers["content-security-policy"]
        for asset in re.findall(r'(?:src|href)="([^"]+)"', shell.text):
            if asset.startswith(".."):
                continue  # the API docs link of <noscript>
            served = api.get(f"/console/{asset}")
            assert served.status_code == 200, asset
            # Offline, no CDN: nothing the console loads names another host.
            assert not re.search(r"https?://|//cdn", served.text), asset
        for name in FILES:  # the modules main.js imports, too
            served = api.get(f"/console/{name}")
            assert served.status_code == 200 and not re.search(r"https?://|//cdn", served.text), name
        assert api.get("/console/js/main.js").headers["content-type"].startswith("text/javascript")
        assert api.get("/console/js/nothing.js").status_code == 404
        assert api.get("/console/%2e%2e/__init__.py").status_code == 404
        assert not [path for path in api.get("/openapi.json").json()["paths"] if path.startswith("/console")]


def test_agents_are_listed_created_renamed_and_deleted_with_confirmation(service: Served, page: Page) -> None:
    with service.api() as api:
        extra = [new_agent(api, f"console list {i}") for i in range(21)]  # more than one page of the sidebar
        page.goto(f"{service.url}/console/")
        sidebar = page.get_by_role("navigation", name="Agents")
        items = sidebar.locator("li")
        expect(items).to_have_count(20)
        sidebar.get_by_role("button", name="More agents").click()
        expect(items.nth(20)).to_be_visible()
        assert items.count() > 20

        page.get_by_label("New agent's name").fill("花子 コンソール")
        sidebar.get_by_role("button", name="Create").click()
        expect(page.locator(".agent-head h2")).to_have_text("花子 コンソール")
        agent_id = matched(re.search(r"#/agents/([0-9a-f-]{36})/memory", page.url)).group(1)
        assert api.get(f"/v1/agents/{agent_id}").json()["name"] == "花子 コンソール"
        expect(page.locator("[data-block=persona]")).to_be_visible()
        expect(page.locator("[data-block=human] .version")).to_have_text("v1")

        page.get_by_role("button", name="Rename").click()
        page.get_by_label("Agent name").fill("花子 renamed")
        page.get_by_label("Agent name").press("Enter")
        expect(page.locator(".agent-head h2")).to_have_text("花子 renamed")
        expect(sidebar.locator(f'li[data-agent="{agent_id}"] a')).to_have_text("花子 renamed")
        assert api.get(f"/v1/agents/{agent_id}").json()["name"] == "花子 renamed"

        dialog = page.locator("dialog#confirm")
        page.locator(".agent-head").get_by_role("button", name="Delete agent").click()
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text("Delete 花子 renamed?")
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_be_hidden()
        assert api.get(f"/v1/agents/{agent_id}").status_code == 200

        page.locator(".agent-head").get_by_role("button", name="Delete agent").click()
        dialog.get_by_role("button", name="Delete agent").click()
        expect(sidebar.locator(f'li[data-agent="{agent_id}"]')).to_have_count(0)
        expect(page.get_by_text("Pick an agent, or create one.")).to_be_visible()
        assert api.get(f"/v1/agents/{agent_id}").status_code == 404
        for agent in extra:
            api.delete(f"/v1/agents/{agent['id']}")


def test_block_editor_counts_as_you_type_saves_with_if_match_and_restores_history(service: Served, page: Page) -> None:
    with service.api() as api:
        agent = new_agent(api, "editor", blocks=[{"label": "human", "value": "名前: 太郎", "limit": 30}])
        open_agent(page, service.url, agent)
        card = page.locator("[data-block=human]")
        editor = card.get_by_label("Value of block human")
        counter = card.locator(".counter")
        expect(card.locator(".version")).to_have_text("v1")
        expect(counter).to_have_text("6 / 30")
        editor.press("End")
        editor.press_sequentially("。寿司")
        expect(counter).to_have_text("9 / 30")  # code points, as the service counts them
        editor.fill("あ" * 31)
        expect(counter).to_have_text("31 / 30")
        expect(counter).to_have_class(re.compile("over"))
        expect(card.get_by_role("button", name="Save")).to_be_disabled()

        edited = "名前: 太郎。好きな食べ物: 寿司"
        editor.fill(edited)
        card.get_by_role("button", name="Save").click()
        expect(card.locator(".version")).to_have_text("v2")
        expect(card.get_by_role("status")).to_have_text("Saved as v2")
        assert block(api, agent, "human")["value"] == edited

        card.get_by_role("button", name="History").click()
        revisions = card.locator(".revision")
        expect(revisions).to_have_count(2)
        expect(revisions.first.locator("ins")).to_have_text("。好きな食べ物: 寿司")
        revisions.nth(1).locator("summary").click()
        card.get_by_role("button", name="Restore v1").click()
        expect(card.locator(".version")).to_have_text("v3")
        expect(editor).to_have_value("名前: 太郎")
        expect(revisions).to_have_count(3)
        assert block(api, agent, "human")["value"] == "名前: 太郎"

        editor.fill("名前: 太郎 (keyboard)")
        editor.press("Control+Enter")
        expect(card.locator(".version")).to_have_text("v4")
        assert block(api, agent, "human")["value"] == "名前: 太郎 (keyboard)"
        api.delete(f"/v1/agents/{agent['id']}")


def test_a_stale_save_shows_the_newer_value_beside_yours_to_reload_or_overwrite(service: Served, page: Page) -> None:
    with service.api() as api:
        agent = new_agent(api, "conflicts", blocks=[{"label": "human", "value": "好きな色: 未定", "limit": 200}])
        open_agent(page, service.url, agent)
        card = page.locator("[data-block=human]")
        editor = card.get_by_label("Value of block human")
        conflict = card.locator(".conflict")
        mine = "好きな色: 青。海の色が好きだと言っていた。"
        editor.fill(mine)
        # Behind the page's back (the agent, or another admin): the block moves on to v2.
        theirs = "好きな色: 赤。"
        moved = api.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": theirs}, headers={"If-Match": "1"})
        assert moved.status_code == 200, moved.text
        card.get_by_role("button", name="Save").click()
        expect(conflict).to_be_visible()
        expect(conflict.locator(".theirs")).to_contain_text("Newer value — v2")
        expect(conflict.locator(".theirs pre")).to_have_text(theirs)
        expect(conflict.locator(".mine pre")).to_have_text(mine)
        expect(card.locator(".block-foot .status")).to_contain_text("Not saved")
        assert block(api, agent, "human")["value"] == theirs  # nothing was overwritten
        keep(page, "console-412.png")

        conflict.get_by_role("button", name="Reload v2 (discard mine)").click()
        expect(conflict).to_be_hidden()
        expect(editor).to_have_value(theirs)
        expect(card.locator(".version")).to_have_text("v2")

        editor.fill(mine)
        api.put(f"/v1/agents/{agent['id']}/memory/human", json={"value": "好きな色: 緑。"}, headers={"If-Match": "2"})
        card.get_by_role("button", name="Save").click()
        expect(conflict.locator(".theirs pre")).to_have_text("好きな色: 緑。")
        conflict.get_by_role("button", name="Overwrite v3 with mine").click()
        expect(conflict).to_be_hidden()
        expect(card.locator(".version")).to_have_text("v4")
        current = block(api, agent, "human")
        assert current["value"] == mine and current["version"] == 4
        api.delete(f"/v1/agents/{agent['id']}")


def test_archival_search_in_japanese_with_scores_tags_and_dates(service: Served, page: Page) -> None:
    with service.api() as api:
        agent = new_agent(api, "アーカイブ")
        passages = [
            ("好きな食べ物は寿司です。特にサーモンの握りが好きで、週末は近所の回転寿司に行く。", ["food"]),
            ("毎朝六時に近所の公園をジョギングしている。雨の日は休む。", ["habit"]),
            ("The user's cat is called Mochi and sleeps on the keyboard.", ["pet"]),
            ("東京の渋谷区に住んでいて、職場までは電車で二十分かかる。", ["home"]),
        ]
        stored = api.post(
            f"/v1/agents/{agent['id']}/archival/batch", json={"items": [{"content": c, "tags": t} for c, t in passages]}
        )
        assert stored.status_code == 201, stored.text
        open_agent(page, service.url, agent, "archival")
        view = page.get_by_role("region", name="Archival memory")
        results = view.locator(".passage")
        expect(results).to_have_count(4)  # listed, newest first

        page.get_by_label("New passage", exact=True).fill("ラーメンは味噌が一番好き。月に二回は食べに行く。")
        page.get_by_label("Tags of the new passage").fill("food, 麺")
        view.get_by_role("button", name="Add passage").click()
        expect(view.get_by_text("Added")).to_be_visible()
        expect(results).to_have_count(5)

        page.get_by_label("Archival search").fill("好きな食べ物は何？")
        view.get_by_role("button", name="Search").click()
        expect(view.get_by_role("status").first).to_contain_text("for “好きな食べ物は何？”")
        expect(results.first.locator(".content")).to_contain_text("寿司")
        scores = [float(s.removeprefix("score ")) for s in results.locator(".score[title=score]").all_inner_texts()]
        assert scores and scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1
        keep(page, "console-archival-ja.png")

        page.get_by_label("Only passages with all these tags").fill("food")
        view.get_by_role("button", name="Search").click()
        expect(results).to_have_count(2)
        for tags in results.locator(".meta").all_inner_texts():
            assert "food" in tags

        today = datetime.now(UTC).date()  # the browser runs in UTC too
        yesterday = (today - timedelta(days=1)).isoformat()
        page.get_by_label("Stored on or before").fill(yesterday)
        view.get_by_role("button", name="Search").click()
        expect(results).to_have_count(0)
        page.get_by_label("Stored on or before").fill("")
        page.get_by_label("Stored on or after").fill(today.isoformat())
        view.get_by_role("button", name="Search").click()
        expect(results).to_have_count(2)

        ramen = results.filter(has_text="ラーメン")
        passage_id = ramen.get_attribute("data-id")
        ramen.get_by_role("button", name="Delete passage").click()
        page.locator("dialog#confirm").get_by_role("button", name="Delete passage").click()
        expect(results).to_have_count(1)
        assert api.get(f"/v1/agents/{agent['id']}/archival/{passage_id}").status_code == 404
        api.delete(f"/v1/agents/{agent['id']}")


def test_a_passages_sources_show_as_a_count_that_unfolds_to_their_ids(service: Served, page: Page) -> None:
    with service.api() as api:
        agent = new_agent(api, f"出典 {datetime.now(UTC):%H%M%S%f}")
        lines = [{"role": "user", "content": "This is Max, my new puppy!"}, {"role": "user", "content": "Max is brown."}]
        said = api.post(f"/v1/agents/{agent['id']}/messages", json={"messages": lines}).json()["message_ids"]
        fact = api.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user has a brown puppy", "sources": said})
        assert fact.status_code == 201, fact.text
        api.post(f"/v1/agents/{agent['id']}/archival", json={"content": "The user lives in Osaka"})
        open_agent(page, service.url, agent, "archival")
        results = page.get_by_role("region", name="Archival memory").locator(".passage")
        expect(results).to_have_count(2)
        expect(results.filter(has_text="Osaka").locator(".sources")).to_have_count(0)  # none: nothing shown
        sources = results.filter(has_text="puppy").locator(".sources")
        expect(sources.locator("summary")).to_have_text("2 sources")
        ids = sources.locator("code")
        expect(ids.first).to_be_hidden()  # folded
        sources.locator("summary").click()
        expect(ids).to_have_text([i[:8] for i in said])  # short, the whole id on hover
        assert [ids.nth(n).get_attribute("title") for n in range(2)] == said
        api.delete(f"/v1/agents/{agent['id']}")


def test_chat_pane_shows_each_step_live_and_the_memory_it_edits(
    service: Served, page: Page, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> None:
    release = threading.Event()
    request.addfinalizer(release.set)  # never leave the scripted LLM waiting

    def held_reply(request: dict) -> dict:
        # The turn's second LLM call waits until the test has seen the first step's events in the page.
        release.wait(timeout=40)
        return tools(call("send_message", text="覚えました！お寿司、いいですね。"))

    llm.reset(
        tools(
            call("core_memory_append", label="human", content="好きな食べ物: 寿司"),
            content="ユーザーは寿司が好きだと言った。core memory の human に書いておこう。",
        ),
        held_reply,
    )
    with service.api() as api:
        agent = new_agent(api, "チャット", blocks=[{"label": "human", "value": "名前: 太郎", "limit": 500}])
        open_agent(page, service.url, agent)
        chat = page.get_by_role("complementary", name="Chat")
        expect(chat).to_have_attribute("data-connected", "true")
        page.get_by_label("Message to the agent").fill("僕はお寿司が大好きです。覚えておいてね。")
        page.get_by_label("Message to the agent").press("Enter")

        turn = chat.locator(".turn")
        expect(turn.locator(".bubble.user")).to_have_text("僕はお寿司が大好きです。覚えておいてね。")
        reasoning = turn.locator(".step.reasoning")
        expect(reasoning).to_contain_text("ユーザーは寿司が好きだと言った。")
        tool = turn.locator(".step.tool[data-tool=core_memory_append]")
        expect(tool.locator(".args")).to_contain_text('"content": "好きな食べ物: 寿司"')
        expect(tool.locator(".tool-result.ok")).to_be_visible()
        # Still mid-turn: the steps arrived live, before the reply exists.
        expect(turn).to_have_class(re.compile("running"))
        expect(turn.locator(".bubble.agent")).to_have_count(0)
        release.set()

        expect(turn.locator(".bubble.agent")).to_have_text("覚えました！お寿司、いいですね。")
        expect(turn.locator(".turn-foot")).to_contain_text("end_turn · 2 LLM calls")
        card = page.locator("[data-block=human]")
        expect(card.locator(".version")).to_have_text("v2")  # the agent's edit, shown without a reload
        expect(card.get_by_label("Value of block human")).to_have_value(re.compile("好きな食べ物: 寿司"))
        keep(page, "console-chat.png")

        reasoning.locator("summary").click()  # steps are collapsible
        expect(reasoning).not_to_have_attribute("open", "")
        expect(reasoning.locator("p")).to_be_hidden()

        page.get_by_role("tab", name="Recall").click()
        page.get_by_label("Recall search").fill("寿司")
        recall = page.get_by_role("region", name="Recall memory")
        recall.get_by_role("button", name="Search").click()
        expect(recall.locator(".message.role-user").first).to_contain_text("僕はお寿司が大好きです。")

        page.get_by_role("tab", name="Context").click()
        context = page.get_by_role("region", name="Context")
        expect(context.locator(".budget h3")).to_contain_text(re.compile(r"Tokens: \d+ of \d+"))
        expect(context.locator(".prompt").first).to_contain_text("好きな食べ物: 寿司")
        expect(context.locator(".message.role-assistant").first).to_be_visible()
        api.delete(f"/v1/agents/{agent['id']}")


def test_chat_pane_shows_the_reply_grow_as_the_llm_writes_it(
    service: Served, page: Page, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> None:
    rest = threading.Event()
    request.addfinalizer(rest.set)
    reply = "少しずつ書いています。Written a piece at a time."
    llm.reset(paused(tools(call("send_message", text=reply)), after_chunks=6, gate=rest))  # the stream halts midway
    with service.api() as api:
        agent = new_agent(api, "ストリーム")
        open_agent(page, service.url, agent)
        chat = page.get_by_role("complementary", name="Chat")
        expect(chat).to_have_attribute("data-connected", "true")
        page.get_by_label("Message to the agent").fill("書いて")
        page.get_by_label("Message to the agent").press("Enter")
        growing = chat.locator(".turn .bubble.agent.growing")
        expect(growing).to_have_text(re.compile("^少しずつ"))
        partial = growing.inner_text()
        assert reply.startswith(partial) and len(partial) < len(reply)
        rest.set()
        expect(chat.locator(".turn .bubble.agent")).to_have_text(reply)
        expect(chat.locator(".turn .bubble.agent.growing")).to_have_count(0)
        expect(chat.locator(".turn-foot")).to_contain_text("end_turn")
        api.delete(f"/v1/agents/{agent['id']}")


def test_chat_pane_says_before_the_first_message_that_no_llm_will_answer(
    database_url: str, embedder: Embedder, page: Page
) -> None:
    bare = Settings(database_url=database_url, openai_base_url=None, openai_api_key=None, llm_model=None, local_llm=False)
    with Served(bare, embedder) as mute, mute.api() as api:
        agent = new_agent(api, "無口")
        open_agent(page, mute.url, agent)
        chat = page.get_by_role("complementary", name="Chat")
        expect(chat.locator(".service-note")).to_contain_text("No LLM is configured")
        expect(chat.locator(".turn")).to_have_count(0)
        api.delete(f"/v1/agents/{agent['id']}")


@pytest.fixture(scope="module")
def keyed_service(keyed_database: str, llm: ScriptedLLM, embedder: Embedder) -> Iterator[Served]:
    with Served(served_settings(keyed_database, llm, admin_key=ADMIN_KEY), embedder) as served:
        yield served


def test_sign_in_keeps_the_key_in_the_session_and_sends_it_as_a_bearer_header(
    keyed_service: Served, page: Page, llm: ScriptedLLM
) -> None:
    with keyed_service.api() as api:
        tenant = api.post("/v1/admin/tenants", json={"name": "console"}, headers=admin())
        issued = api.post(f"/v1/admin/tenants/{tenant.json()['id']}/keys", json={"name": "console"}, headers=admin())
        key = issued.json()["key"]
    requests: list[tuple[str, str | None]] = []
    page.on("request", lambda r: requests.append((r.url, r.headers.get("authorization"))))
    page.goto(f"{keyed_service.url}/console/")
    form = page.locator("form.sign-in")
    expect(form.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("API key").fill("not-a-key-" + "x" * 30)
    page.get_by_label("API key").press("Enter")
    expect(form).to_contain_text("refused")
    page.get_by_label("API key").fill(key)
    page.get_by_label("API key").press("Enter")
    expect(page.get_by_role("navigation", name="Agents")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('engram.apiKey')") == key
    requests.clear()  # from here on, every API call carries the key
    assert page.evaluate("localStorage.length") == 0

    page.get_by_label("New agent's name").fill("keyed")
    page.get_by_role("button", name="Create").click()
    chat = page.get_by_role("complementary", name="Chat")
    expect(chat).to_have_attribute("data-connected", "true")
    llm.reset(tools(call("send_message", text="はい、聞こえています。")))
    page.get_by_label("Message to the agent").fill("聞こえますか？")
    page.get_by_label("Message to the agent").press("Enter")
    expect(chat.locator(".bubble.agent")).to_have_text("はい、聞こえています。")  # the socket's first frame carried the key

    page.reload()  # the key survives a reload of the tab
    expect(page.get_by_role("navigation", name="Agents")).to_be_visible()
    api_calls = [(url, auth) for url, auth in requests if "/v1/" in url]
    assert len(api_calls) >= 4 and all(auth == f"Bearer {key}" for _, auth in api_calls), api_calls
    assert not any(key in url for url, _ in requests) and key not in page.url

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('engram.apiKey')") is None


def test_a_message_is_forgotten_from_the_recall_view_with_what_was_drawn_from_it(service: Served, page: Page) -> None:
    with service.api() as api:
        agent = new_agent(api, "忘却")
        said = ["My locker code is PLUM-4471.", "I had ramen for lunch."]
        handed = api.post(f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": t} for t in said]})
        code, _ = handed.json()["message_ids"]
        fact = api.post(
            f"/v1/agents/{agent['id']}/archival", json={"content": "The locker code is PLUM-4471.", "sources": [code]}
        )
        assert fact.status_code == 201, fact.text
        open_agent(page, service.url, agent, "recall")
        view = page.get_by_role("region", name="Recall memory")
        messages = view.locator(".message")
        expect(messages).to_have_count(2)

        locker = messages.filter(has_text="PLUM-4471")
        locker.get_by_role("button", name="Forget message").click()
        dialog = page.locator("dialog#confirm")
        expect(dialog).to_contain_text("with the passages drawn from it alone")
        dialog.get_by_role("button", name="Forget message").click()
        expect(view.get_by_role("status").first).to_have_text("Message forgotten, with 1 passage drawn from it alone")
        expect(messages).to_have_count(1)
        assert api.get(f"/v1/agents/{agent['id']}/archival/{fact.json()['id']}").status_code == 404
        assert [m["content"] for m in api.get(f"/v1/agents/{agent['id']}/messages").json()["items"]] == said[1:]
        api.delete(f"/v1/agents/{agent['id']}")
