// Core memory: one editor per block with a live `chars_used / limit`, saved with If-Match. A 412 (the block moved
// on since it was loaded — the agent or another admin wrote it) shows the newer value beside the admin's, to
// reload or to overwrite knowingly. History shows each revision's diff and restores any of them.

import { call } from "./api.js";
import { diffView } from "./diff.js";
import { charCount, h, fill, problem, say, shortId, when } from "./dom.js";

export function coreMemoryView(agent) {
  const cards = new Map();
  const list = h("div", { class: "blocks" });
  const status = h("p", { class: "status", role: "status" });
  const view = h("section", { class: "view", "aria-label": "Core memory" }, status, list, newBlockForm());

  async function refresh() {
    try {
      const { blocks } = await call("GET", ["agents", agent.id, "memory"]);
      for (const block of blocks) {
        if (!cards.has(block.label)) {
          const card = blockCard(agent, block);
          cards.set(block.label, card);
          list.append(card.el);
        }
        cards.get(block.label).update(block);
      }
      say(status, "");
    } catch (error) {
      say(status, `Could not load core memory: ${problem(error)}`, "error");
    }
  }

  function newBlockForm() {
    const label = h("input", {
      name: "label",
      required: true,
      pattern: "[A-Za-z0-9_\\-]{1,64}",
      placeholder: "label",
      "aria-label": "New block label",
    });
    const limit = h("input", {
      name: "limit",
      type: "number",
      min: 1,
      max: 100000,
      value: "2000",
      "aria-label": "New block limit",
    });
    const note = h("span", { class: "status", role: "status" });
    const form = h(
      "form",
      { class: "inline-form new-block" },
      h("span", { class: "muted" }, "New block"),
      label,
      limit,
      h("button", { type: "submit" }, "Add block"),
      note,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await call("PUT", ["agents", agent.id, "memory", label.value], {
          body: { value: "", limit: Number(limit.value) },
          headers: { "If-None-Match": "*" }, // create: never overwrite a block of that label
        });
        label.value = "";
        await refresh();
        say(note, "");
      } catch (error) {
        say(note, problem(error), "error");
      }
    });
    return form;
  }

  refresh();
  return { el: view, refresh };
}

function blockCard(agent, initial) {
  let block = initial; // the server's block as last read: its value and version are what If-Match refers to
  const path = ["agents", agent.id, "memory", initial.label];
  const editor = h("textarea", { rows: 5, spellcheck: false, "aria-label": `Value of block ${initial.label}` });
  const counter = h("span", { class: "counter", "aria-live": "polite" });
  const version = h("span", { class: "version" });
  const status = h("span", { class: "status", role: "status" });
  const save = h(
    "button",
    { type: "button", class: "primary", onclick: () => write({ value: editor.value }, block.version, editor.value) },
    "Save",
  );
  const revert = h("button", { type: "button", onclick: () => load(block) }, "Revert");
  const historyToggle = h("button", { type: "button", "aria-expanded": "false", onclick: toggleHistory }, "History");
  const conflict = h("div", { class: "conflict", hidden: true, role: "alert" });
  const history = h("div", { class: "history", hidden: true });
  const meta = h("span", { class: "meta" });
  const el = h(
    "article",
    { class: "block", dataset: { block: initial.label } },
    h("header", {}, h("h3", {}, initial.label), version, meta),
    editor,
    h("div", { class: "block-foot" }, counter, save, revert, historyToggle, status),
    conflict,
    history,
  );

  editor.addEventListener("input", refreshCounter);
  editor.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && (event.key === "Enter" || event.key === "s")) {
      event.preventDefault();
      if (!save.disabled) save.click();
    }
  });

  function dirty() {
    return editor.value !== block.value;
  }

  function refreshCounter() {
    const used = charCount(editor.value);
    counter.textContent = `${used} / ${block.limit}`;
    counter.classList.toggle("over", used > block.limit);
    save.disabled = !dirty() || used > block.limit;
    revert.disabled = !dirty();
    el.classList.toggle("dirty", dirty());
  }

  function load(next) {
    block = next;
    editor.value = next.value;
    version.textContent = `v${next.version}`;
    fill(
      meta,
      next.read_only ? h("span", { class: "badge", title: "the agent cannot change it; admins can" }, "read-only") : null,
      next.description ? h("span", { class: "muted" }, next.description) : null,
    );
    conflict.hidden = true;
    refreshCounter();
  }

  /** A newer read of the block: taken when the admin has no unsaved edit, otherwise only noted. */
  function update(next) {
    if (!dirty() || next.version === block.version) {
      if (next.version !== block.version || next.value !== block.value) load(next);
      return;
    }
    say(status, `changed on the server (now v${next.version}) while you edit: saving will show both`, "");
  }

  /** PUT the block; `intended` is the value the write would leave (shown beside the newer one on a 412). */
  async function write(body, expectedVersion, intended) {
    save.disabled = true;
    try {
      const written = await call("PUT", path, { body, headers: { "If-Match": String(expectedVersion) } });
      load(written);
      say(status, `Saved as v${written.version}`, "ok");
      if (!history.hidden) await showHistory();
    } catch (error) {
      if (error.status === 412) await showConflict(body, intended);
      else say(status, problem(error), "error");
      refreshCounter();
    }
  }

  async function showConflict(body, mine) {
    let newer;
    try {
      const { blocks } = await call("GET", ["agents", agent.id, "memory"]);
      newer = blocks.find((b) => b.label === block.label);
    } catch (error) {
      say(status, problem(error), "error");
      return;
    }
    if (!newer) {
      say(status, "this block no longer exists", "error");
      return;
    }
    say(status, `Not saved: the block changed since you loaded v${block.version}`, "error");
    fill(
      conflict,
      h("h4", {}, `Someone else saved v${newer.version} (${when(newer.updated_at)}) after your v${block.version}`),
      h(
        "div",
        { class: "side-by-side" },
        h("figure", { class: "theirs" }, h("figcaption", {}, `Newer value — v${newer.version}`), h("pre", {}, newer.value)),
        h("figure", { class: "mine" }, h("figcaption", {}, "Your value (not saved)"), h("pre", {}, mine)),
      ),
      h("p", { class: "muted" }, "From the newer value to yours:"),
      diffView(newer.value, mine),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", onclick: () => reload(newer) }, `Reload v${newer.version} (discard mine)`),
        h(
          "button",
          { type: "button", class: "danger", onclick: () => write(body, newer.version, mine) },
          `Overwrite v${newer.version} with mine`,
        ),
      ),
    );
    conflict.hidden = false;
    conflict.querySelector("button").focus();
  }

  function reload(newer) {
    load(newer);
    say(status, `Reloaded v${newer.version}; your edit was discarded`);
    editor.focus();
  }

  async function toggleHistory() {
    const open = history.hidden;
    historyToggle.setAttribute("aria-expanded", String(open));
    if (open) await showHistory();
    else history.hidden = true;
  }

  async function showHistory() {
    let revisions;
    try {
      ({ items: revisions } = await call("GET", [...path, "history"]));
    } catch (error) {
      say(status, problem(error), "error");
      return;
    }
    fill(
      history,
      h("h4", {}, `History of ${block.label}`),
      revisions.map((revision, index) => {
        const previous = revisions[index + 1]; // newest first
        const current = revision.version === block.version;
        return h(
          "details",
          { class: "revision", dataset: { version: revision.version } },
          h(
            "summary",
            {},
            h("strong", {}, `v${revision.version}`),
            ` · ${revision.source}`,
            revision.turn_id ? ` · turn ${shortId(revision.turn_id)}` : "",
            ` · ${when(revision.created_at)}`,
            current ? h("span", { class: "badge" }, "current") : "",
          ),
          previous ? diffView(previous.value, revision.value) : h("pre", {}, revision.value || "(empty)"),
          current
            ? null
            : h(
                "button",
                { type: "button", onclick: () => write({ restore_version: revision.version }, block.version, revision.value) },
                `Restore v${revision.version}`,
              ),
        );
      }),
    );
    history.hidden = false;
  }

  load(initial);
  return { el, update };
}
