// The context view: what the LLM would see now — the token budget and its parts, the rendered system prompt
// (instructions, core memory, summary) and the messages still in context.

import { messageItem } from "./archival.js";
import { call } from "./api.js";
import { h, fill, problem, say } from "./dom.js";

export function contextView(agent) {
  const status = h("p", { class: "status", role: "status" });
  const body = h("div");
  const view = h(
    "section",
    { class: "view", "aria-label": "Context" },
    h("div", { class: "row" }, h("button", { type: "button", onclick: refresh }, "Refresh"), status),
    body,
  );

  async function refresh() {
    try {
      const context = await call("GET", ["agents", agent.id, "context"]);
      fill(body, budget(context.tokens), sections(context));
      say(status, "");
    } catch (error) {
      say(status, problem(error), "error");
    }
  }

  refresh();
  return { el: view, refresh };
}

function budget(tokens) {
  const share = (n) => `${Math.min(100, (100 * n) / tokens.window).toFixed(2)}%`;
  const part = (name, n) => {
    const bar = h("span", { class: `part part-${name}`, title: `${name}: ${n} tokens` });
    bar.style.width = share(n); // CSSOM, allowed by the page's style-src 'self'
    return bar;
  };
  const mark = (name, n) => {
    const line = h("span", { class: `mark mark-${name}`, title: `${name} at ${n} tokens` });
    line.style.left = share(n);
    return line;
  };
  const rows = [
    ["system prompt (instructions, core memory, summary)", tokens.system],
    ["tool schemas", tokens.tools],
    ["messages in context", tokens.messages],
    ["total", tokens.total],
    ["memory-pressure notice above", tokens.warn_at],
    ["eviction (summary) above", tokens.evict_at],
    ["window", tokens.window],
  ];
  return h(
    "div",
    { class: "budget" },
    h("h3", {}, `Tokens: ${tokens.total} of ${tokens.window} (${share(tokens.total)})`),
    h(
      "div",
      { class: "bar", role: "img", "aria-label": `${tokens.total} of ${tokens.window} tokens used` },
      part("system", tokens.system),
      part("tools", tokens.tools),
      part("messages", tokens.messages),
      mark("warn", tokens.warn_at),
      mark("evict", tokens.evict_at),
    ),
    h(
      "table",
      { class: "tokens" },
      h(
        "tbody",
        {},
        rows.map(([name, n]) => h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, String(n)))),
      ),
    ),
  );
}

function sections(context) {
  return [
    h("details", { open: true }, h("summary", {}, "System prompt"), h("pre", { class: "prompt" }, context.system_prompt)),
    context.summary
      ? h("details", {}, h("summary", {}, "Summary of evicted turns"), h("pre", { class: "prompt" }, context.summary))
      : null,
    h(
      "details",
      { open: true },
      h(
        "summary",
        {},
        `Messages in context: ${context.messages.length} (${context.messages_out_of_context} older ones only in recall memory)`,
      ),
      h("ol", { class: "results" }, context.messages.map(messageItem)),
    ),
  ];
}
