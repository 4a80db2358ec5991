// Archival memory (hybrid search with scores, tag and date filters, sources, add, delete) and recall memory (the
// conversation: search or browse). Both list newest first without a query, a page at a time.

import { call } from "./api.js";
import { confirmDialog, h, problem, say, shortId, when } from "./dom.js";

const PAGE = 20;

/** "2026-12-03" (a date input, local time) → an ISO instant; `endOfDay` makes an inclusive upper bound. */
function instant(day, endOfDay = false) {
  if (!day) return undefined;
  const date = new Date(`${day}T00:00:00`);
  if (endOfDay) date.setDate(date.getDate() + 1);
  return date.toISOString();
}

function splitTags(text) {
  return text
    .split(/[,、，\s]+/u)
    .map((t) => t.trim())
    .filter(Boolean);
}

/** A passage's provenance: how many sources, unfolding to their ids (short; the whole id on hover). */
function sources(ids) {
  if (!ids?.length) return null;
  return h(
    "details",
    { class: "sources" },
    h(
      "summary",
      { title: "The messages and passages it was distilled from" },
      `${ids.length} source${ids.length === 1 ? "" : "s"}`,
    ),
    h("ul", {}, ids.map((id) => h("li", {}, h("code", { title: id }, shortId(id))))),
  );
}

/** Erase (DELETE `path`) what `item` of `list` shows, and say `done` and what went with it (app/memory/archival/erasure.py),
 * also dropped from the list. */
async function erase(status, list, item, path, done) {
  try {
    const erased = await call("DELETE", path);
    const gone = [...(erased.erased_messages ?? []), ...erased.erased_passages];
    item.remove();
    for (const shown of list.querySelectorAll("[data-id]")) if (gone.includes(shown.dataset.id)) shown.remove();
    const n = erased.erased_passages.length;
    say(status, `${done}${n ? `, with ${n} passage${n === 1 ? "" : "s"} drawn from it alone` : ""}`, "ok");
  } catch (error) {
    say(status, problem(error), "error");
  }
}

function score(value, label = "score") {
  return value === null || value === undefined
    ? null
    : h("span", { class: "score", title: label }, `${label} ${value.toFixed(3)}`);
}

export function archivalView(agent) {
  const query = h("input", {
    type: "search",
    name: "query",
    placeholder: "Search archival memory (empty: newest first)",
    "aria-label": "Archival search",
  });
  const tags = h("input", {
    name: "tags",
    placeholder: "tags, comma separated",
    "aria-label": "Only passages with all these tags",
  });
  const after = h("input", { type: "date", name: "after", "aria-label": "Stored on or after" });
  const before = h("input", { type: "date", name: "before", "aria-label": "Stored on or before" });
  const mode = h(
    "select",
    { name: "mode", "aria-label": "Search mode" },
    ["hybrid", "vector", "text"].map((m) => h("option", { value: m }, m)),
  );
  const status = h("p", { class: "status", role: "status" });
  const results = h("ol", { class: "results", "aria-label": "Archival passages" });
  const more = h("button", { type: "button", hidden: true, onclick: () => run(cursor) }, "More");
  let cursor = null;

  const search = h(
    "form",
    { class: "filters", role: "search" },
    query,
    h("label", {}, "Tags ", tags),
    h("label", {}, "From ", after),
    h("label", {}, "Until ", before),
    h("label", {}, "Mode ", mode),
    h("button", { type: "submit", class: "primary" }, "Search"),
  );
  search.addEventListener("submit", (event) => {
    event.preventDefault();
    run(null);
  });

  const content = h("textarea", {
    rows: 3,
    required: true,
    maxlength: 20000,
    "aria-label": "New passage",
    placeholder: "A new passage to remember",
  });
  const newTags = h("input", { placeholder: "tags, comma separated", "aria-label": "Tags of the new passage" });
  const added = h("span", { class: "status", role: "status" });
  const add = h(
    "form",
    { class: "add-passage" },
    content,
    h("div", { class: "row" }, newTags, h("button", { type: "submit" }, "Add passage"), added),
  );
  add.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const passage = await call("POST", ["agents", agent.id, "archival"], {
        body: { content: content.value, tags: splitTags(newTags.value) },
      });
      say(added, passage.duplicate ? "Already stored (a near-duplicate): nothing added" : "Added", "ok");
      content.value = "";
      await run(null);
    } catch (error) {
      say(added, problem(error), "error");
    }
  });

  async function run(from) {
    const searching = query.value.trim() !== "";
    const params = {
      query: searching ? query.value.trim() : undefined,
      tags: splitTags(tags.value),
      after: instant(after.value),
      before: instant(before.value, true),
      mode: searching ? mode.value : undefined,
      k: searching ? PAGE : undefined,
      limit: searching ? undefined : PAGE,
      cursor: from ?? undefined,
    };
    try {
      const page = await call("GET", ["agents", agent.id, "archival"], { query: params });
      if (!from) results.replaceChildren();
      results.append(...page.items.map(passageItem));
      cursor = page.next_cursor;
      more.hidden = !cursor;
      const shown = results.children.length;
      say(
        status,
        searching
          ? `${shown} result${shown === 1 ? "" : "s"} for “${params.query}”`
          : `${shown} passage${shown === 1 ? "" : "s"}, newest first`,
      );
    } catch (error) {
      say(status, problem(error), "error");
    }
  }

  function passageItem(passage) {
    const remove = h("button", { type: "button", class: "danger small", "aria-label": "Delete passage" }, "Delete");
    const item = h(
      "li",
      { class: "passage", dataset: { id: passage.id } },
      h("p", { class: "content" }, passage.content),
      h(
        "div",
        { class: "meta" },
        score(passage.score),
        score(passage.similarity, "cosine"),
        passage.tags.map((t) => h("span", { class: "tag" }, t)),
        h("time", { datetime: passage.created_at }, when(passage.created_at)),
        sources(passage.sources),
        remove,
      ),
    );
    remove.addEventListener("click", async () => {
      const preview = passage.content.length > 80 ? `${passage.content.slice(0, 80)}…` : passage.content;
      if (!(await confirmDialog("Delete this passage?", preview, "Delete passage"))) return;
      await erase(status, results, item, ["agents", agent.id, "archival", passage.id], "Passage deleted");
    });
    return item;
  }

  run(null);
  return {
    el: h(
      "section",
      { class: "view", "aria-label": "Archival memory" },
      search,
      status,
      results,
      more,
      h("h3", {}, "Add a passage"),
      add,
    ),
    refresh: () => run(null),
  };
}

export function recallView(agent) {
  const query = h("input", {
    type: "search",
    placeholder: "Search the conversation (empty: newest first)",
    "aria-label": "Recall search",
  });
  const everything = h("input", { type: "checkbox", checked: true });
  const status = h("p", { class: "status", role: "status" });
  const results = h("ol", { class: "results", "aria-label": "Messages" });
  const more = h("button", { type: "button", hidden: true, onclick: () => run(cursor) }, "More");
  let cursor = null;
  const form = h(
    "form",
    { class: "filters", role: "search" },
    query,
    h(
      "label",
      { title: "otherwise only messages that have left the LLM context" },
      everything,
      " include messages still in context",
    ),
    h("button", { type: "submit", class: "primary" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run(null);
  });

  async function run(from) {
    const text = query.value.trim();
    const params = text
      ? { query: text, limit: PAGE, include_context: everything.checked }
      : { limit: PAGE, cursor: from ?? undefined };
    try {
      const page = await call("GET", ["agents", agent.id, "messages"], { query: params });
      if (!from) results.replaceChildren();
      results.append(...page.items.map((m) => messageItem(m, { forget })));
      cursor = page.next_cursor;
      more.hidden = !cursor;
      const shown = results.children.length;
      say(
        status,
        text
          ? `${shown} message${shown === 1 ? "" : "s"} for “${text}”`
          : `${shown} message${shown === 1 ? "" : "s"}, newest first`,
      );
    } catch (error) {
      say(status, problem(error), "error");
    }
  }

  /** Forget a message (DELETE …/messages/{id}) once confirmed; a tool's result goes only with its call. */
  async function forget(message, item) {
    const preview = message.content.length > 80 ? `${message.content.slice(0, 80)}…` : message.content;
    const what = "It leaves recall memory and the agent's context, with the passages drawn from it alone.";
    if (!(await confirmDialog("Forget this message?", preview ? `“${preview}” ${what}` : what, "Forget message"))) return;
    await erase(status, results, item, ["agents", agent.id, "messages", message.id], "Message forgotten");
  }

  run(null);
  return {
    el: h("section", { class: "view", "aria-label": "Recall memory" }, form, status, results, more),
    refresh: () => run(null),
  };
}

/** A message; with `forget`, a button to forget it (not on a tool's result, which goes with its call). An object,
 * not a second argument, so that `messages.map(messageItem)` passes no index for it. */
export function messageItem(message, { forget = null } = {}) {
  const calls = (message.tool_calls ?? []).map((c) => `${c.function?.name ?? c.name ?? "tool"}(${c.function?.arguments ?? ""})`);
  const button =
    forget && message.role !== "tool"
      ? h("button", { type: "button", class: "danger small", "aria-label": "Forget message" }, "Forget")
      : null;
  const item = h(
    "li",
    { class: `message role-${message.role}`, dataset: { id: message.id } },
    h(
      "div",
      { class: "meta" },
      h("span", { class: "role" }, message.name ? `${message.role} · ${message.name}` : message.role),
      score(message.score),
      h("time", { datetime: message.created_at }, when(message.created_at)),
      button,
    ),
    message.content ? h("p", { class: "content" }, message.content) : null,
    calls.length ? h("pre", { class: "calls" }, calls.join("\n")) : null,
  );
  button?.addEventListener("click", () => forget(message, item));
  return item;
}
