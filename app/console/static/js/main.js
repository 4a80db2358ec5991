// The console's shell: sign-in, the agents list, and one agent's screen (memory views beside the chat pane).
// Routes live in the URL's fragment (#/agents/<id>/<view>) so that reload and back work; the key never does.

import { ApiError, apiKey, call } from "./api.js";
import { archivalView, recallView } from "./archival.js";
import { chatPane } from "./chat.js";
import { contextView } from "./context.js";
import { confirmDialog, h, fill, problem, say, when } from "./dom.js";
import { coreMemoryView } from "./memory.js";

const VIEWS = {
  memory: ["Core memory", coreMemoryView],
  archival: ["Archival", archivalView],
  recall: ["Recall", recallView],
  context: ["Context", contextView],
};
const PAGE = 20;
const app = document.getElementById("app");
const signOut = document.getElementById("sign-out");
let current = null; // {agent, views, chat}: the open agent's screen

signOut.addEventListener("click", () => {
  apiKey.clear();
  location.hash = "";
  start();
});
window.addEventListener("engram:unauthorized", () =>
  signIn(apiKey.get() ? "That key was refused: sign in with another." : undefined),
);
window.addEventListener("hashchange", route);

async function start() {
  close();
  try {
    await call("GET", ["agents"], { query: { limit: 1 } });
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return; // the unauthorized event shows the sign-in
    fill(app, h("p", { class: "status", role: "alert", dataset: { kind: "error" } }, problem(error)));
    return;
  }
  signOut.hidden = !apiKey.get();
  fill(
    app,
    sidebar(),
    h("div", { id: "agent", class: "agent" }, h("p", { class: "muted empty" }, "Pick an agent, or create one.")),
  );
  route();
}

function signIn(message) {
  close();
  apiKey.clear();
  signOut.hidden = true;
  const key = h("input", {
    type: "password",
    autocomplete: "off",
    required: true,
    "aria-label": "API key",
    placeholder: "API key",
  });
  const status = h("p", { class: "status", role: "status" });
  const form = h(
    "form",
    { class: "sign-in" },
    h("h2", {}, "Sign in"),
    h(
      "p",
      {},
      message ?? "This service needs an API key. It stays in this browser tab (sessionStorage) until you close it or sign out.",
    ),
    key,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    apiKey.set(key.value.trim());
    try {
      await call("GET", ["agents"], { query: { limit: 1 } });
      start();
    } catch (error) {
      apiKey.clear();
      say(status, error.status === 401 ? "That key was refused." : problem(error), "error");
    }
  });
  fill(app, form);
  key.focus();
}

function sidebar() {
  const list = h("ul", { class: "agents", "aria-label": "Agents" });
  const more = h("button", { type: "button", hidden: true, onclick: () => load(cursor) }, "More agents");
  const status = h("p", { class: "status", role: "status" });
  const name = h("input", { required: true, maxlength: 200, placeholder: "New agent's name", "aria-label": "New agent's name" });
  const form = h("form", { class: "create-agent" }, name, h("button", { type: "submit" }, "Create"));
  let cursor = null;

  async function load(from) {
    try {
      const page = await call("GET", ["agents"], { query: { limit: PAGE, cursor: from ?? undefined } });
      if (!from) list.replaceChildren();
      list.append(...page.items.map(agentLink));
      cursor = page.next_cursor;
      more.hidden = !cursor;
      markCurrent();
    } catch (error) {
      say(status, problem(error), "error");
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const agent = await call("POST", ["agents"], { body: { name: name.value.trim() } });
      name.value = "";
      list.append(agentLink(agent));
      say(status, `Created ${agent.name}`, "ok");
      location.hash = `#/agents/${agent.id}/memory`;
    } catch (error) {
      say(status, problem(error), "error");
    }
  });
  load(null);
  return h("nav", { class: "sidebar", "aria-label": "Agents" }, h("h2", {}, "Agents"), form, status, list, more);
}

function agentLink(agent) {
  return h(
    "li",
    { dataset: { agent: agent.id } },
    h("a", { href: `#/agents/${agent.id}/memory` }, agent.name),
    h("span", { class: "muted" }, when(agent.created_at)),
  );
}

function markCurrent() {
  for (const item of document.querySelectorAll(".agents li")) {
    const here = item.dataset.agent === current?.agent.id;
    item.classList.toggle("current", here);
    item.querySelector("a").toggleAttribute("aria-current", here);
  }
}

async function route() {
  const pane = document.getElementById("agent");
  if (!pane) return;
  const [, id, view = "memory"] = location.hash.match(/^#\/agents\/([0-9a-f-]{36})(?:\/(\w+))?/) ?? [];
  if (!id) {
    close();
    fill(pane, h("p", { class: "muted empty" }, "Pick an agent, or create one."));
    markCurrent();
    return;
  }
  if (current?.agent.id !== id) {
    close();
    try {
      const agent = await call("GET", ["agents", id]);
      current = { agent, views: {}, chat: null };
      fill(pane, agentScreen(agent));
    } catch (error) {
      fill(pane, h("p", { class: "status", role: "alert", dataset: { kind: "error" } }, problem(error)));
      return;
    }
  }
  show(VIEWS[view] ? view : "memory");
  markCurrent();
}

function agentScreen(agent) {
  const title = h("h2", {}, agent.name);
  const status = h("span", { class: "status", role: "status" });
  const rename = h("button", { type: "button", onclick: startRename }, "Rename");
  const remove = h("button", { type: "button", class: "danger", onclick: deleteAgent }, "Delete agent");
  const header = h("header", { class: "agent-head" }, title, h("span", { class: "muted id" }, agent.id), rename, remove, status);
  const tabs = h(
    "div",
    { class: "tabs", role: "tablist", "aria-label": "Memory views" },
    Object.entries(VIEWS).map(([key, [label]]) =>
      h("a", { role: "tab", href: `#/agents/${agent.id}/${key}`, dataset: { view: key } }, label),
    ),
  );
  const panel = h("div", { class: "panel", role: "tabpanel" });
  current.chat = chatPane(agent, {
    onTurnCompleted: () => {
      // The agent may have edited its memory in the turn: show it (editors with unsaved edits only say so).
      for (const view of Object.values(current?.views ?? {})) view.refresh();
    },
  });

  function startRename() {
    const input = h("input", { value: agent.name, required: true, maxlength: 200, "aria-label": "Agent name" });
    const form = h(
      "form",
      { class: "inline-form" },
      input,
      h("button", { type: "submit", class: "primary" }, "Save name"),
      h("button", { type: "button", onclick: () => form.replaceWith(title) }, "Cancel"),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const updated = await call("PATCH", ["agents", agent.id], { body: { name: input.value.trim() } });
        agent.name = updated.name;
        fill(title, updated.name);
        form.replaceWith(title);
        for (const link of document.querySelectorAll(`.agents li[data-agent="${agent.id}"] a`)) link.textContent = updated.name;
        say(status, "Renamed", "ok");
      } catch (error) {
        say(status, problem(error), "error");
      }
    });
    title.replaceWith(form);
    input.select();
  }

  async function deleteAgent() {
    const sure = await confirmDialog(
      `Delete ${agent.name}?`,
      "This deletes the agent and all of its memory: core blocks and their history, archival passages, messages and turns. It cannot be undone.",
      "Delete agent",
    );
    if (!sure) return;
    try {
      await call("DELETE", ["agents", agent.id]);
      document.querySelector(`.agents li[data-agent="${agent.id}"]`)?.remove();
      location.hash = "";
    } catch (error) {
      say(status, problem(error), "error");
    }
  }

  return h("div", { class: "agent-screen" }, h("div", { class: "main" }, header, tabs, panel), current.chat.el);
}

function show(view) {
  const panel = document.querySelector(".panel");
  if (!panel) return; // the agent's screen is gone (signed out, another route) before this view was shown
  for (const tab of document.querySelectorAll(".tabs [role=tab]"))
    tab.setAttribute("aria-selected", String(tab.dataset.view === view));
  const built = current.views[view];
  current.views[view] ??= VIEWS[view][1](current.agent); // a new view loads what it shows
  if (panel.firstChild === current.views[view].el) return;
  fill(panel, current.views[view].el);
  // A view built before keeps its state (unsaved edits, filters) and brings its data up to date.
  if (built) built.refresh();
}

function close() {
  current?.chat?.close();
  current = null;
}

start();
