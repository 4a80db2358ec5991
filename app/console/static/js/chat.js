// The chat pane: the agent's turns as they happen, over the WebSocket (/v1/agents/{id}/ws). Every event of every
// turn of this agent arrives here, whoever started it; each inner step (reasoning, a tool call with its result)
// is a collapsible entry under the turn it belongs to.

import { apiKey, call, socketUrl } from "./api.js";
import { h, fill, say, shortId } from "./dom.js";

const RETRY_MS = [500, 1000, 2000, 5000];

export function chatPane(agent, { onTurnCompleted }) {
  const log = h("div", { class: "chat-log", role: "log", "aria-live": "polite", "aria-label": "Turns and their steps" });
  const state = h("span", { class: "status", role: "status" });
  const input = h("textarea", {
    rows: 3,
    maxlength: 32000,
    "aria-label": "Message to the agent",
    placeholder: "Message (Enter sends, Shift+Enter: new line)",
  });
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const form = h("form", { class: "chat-form" }, input, h("div", { class: "row" }, send, state));
  const el = h(
    "aside",
    { class: "chat", "aria-label": "Chat" },
    h("h2", {}, "Chat ", h("span", { class: "muted" }, "inner steps live")),
    log,
    form,
  );
  const turns = new Map();
  let socket = null;
  let attempt = 0;
  let closed = false;

  function connect() {
    socket = new WebSocket(socketUrl(agent.id));
    say(state, "connecting…");
    socket.addEventListener("open", () => {
      const key = apiKey.get();
      // Browsers cannot set headers on a WebSocket: with keys, the first frame authenticates.
      if (key) socket.send(JSON.stringify({ type: "auth", api_key: key }));
      attempt = 0;
      say(state, "connected", "ok");
      el.dataset.connected = "true";
    });
    socket.addEventListener("message", (message) => render(JSON.parse(message.data)));
    socket.addEventListener("close", (event) => {
      el.dataset.connected = "false";
      if (closed) return;
      if (event.code >= 4000) {
        say(state, `disconnected (${event.code - 4000}): reload to retry`, "error");
        return;
      }
      const wait = RETRY_MS[Math.min(attempt++, RETRY_MS.length - 1)];
      say(state, `disconnected: retrying in ${wait / 1000} s`, "error");
      setTimeout(() => closed || connect(), wait);
    });
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const message = input.value.trim();
    if (!message) return;
    if (socket?.readyState !== WebSocket.OPEN) {
      say(state, "not connected yet", "error");
      return;
    }
    socket.send(JSON.stringify({ type: "chat", message }));
    input.value = "";
  });
  input.addEventListener("keydown", (event) => {
    // isComposing: Enter also confirms a Japanese IME conversion, which must not send the message.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  function turnOf(event) {
    if (!event.turn_id) return null;
    let turn = turns.get(event.turn_id);
    if (!turn) {
      const steps = h("div", { class: "steps" });
      const foot = h("div", { class: "turn-foot" }, "running…");
      turn = {
        el: h("section", { class: "turn running", dataset: { turn: event.turn_id } }, steps, foot),
        steps,
        foot,
        calls: new Map(),
        replies: [], // bubbles of replies still being written: [{step, bubble}], in the order they began
        growing: new Map(), // call_id -> its bubble, while the reply streams
      };
      turns.set(event.turn_id, turn);
      log.append(turn.el);
    }
    return turn;
  }

  function render(event) {
    const stick = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    const turn = turnOf(event);
    const into = turn ? turn.steps : log;
    switch (event.type) {
      case "turn_started":
        if (event.kind === "memory_pass")
          into.append(h("div", { class: "step memory-pass", role: "note" }, event.message));
        else into.append(h("div", { class: "bubble user" }, event.message));
        if (event.demo_model)
          into.append(
            h(
              "div",
              { class: "step demo", role: "note" },
              `Demo model (${event.demo_model}): too small to remember reliably. Connect a real LLM: see the README, "Connect an LLM".`,
            ),
          );
        break;
      case "reasoning":
        into.append(step("reasoning", `Reasoning · step ${event.step}`, h("p", {}, event.text), true));
        break;
      case "tool_call": {
        const result = h("div", { class: "tool-result pending" }, "waiting for the result…");
        const entry = step(
          "tool",
          `Tool · ${event.name}`,
          [h("pre", { class: "args" }, JSON.stringify(event.arguments, null, 2)), result],
          true,
        );
        entry.dataset.tool = event.name;
        turn?.calls.set(event.call_id, { entry, result });
        into.append(entry);
        break;
      }
      case "tool_result": {
        const call = turn?.calls.get(event.call_id);
        const result = h(
          "div",
          { class: `tool-result ${event.ok ? "ok" : "failed"}` },
          h("strong", {}, event.ok ? "result" : "error"),
          h("pre", {}, event.result),
        );
        if (call) {
          call.result.replaceWith(result);
          call.entry.classList.add(event.ok ? "ok" : "failed");
        } else into.append(step("tool", `Result · ${event.name}`, result, true));
        break;
      }
      case "message_delta": {
        // The reply as the LLM writes it; its `message` event then settles the bubble.
        let bubble = turn?.growing.get(event.call_id);
        if (!bubble) {
          bubble = h("div", { class: "bubble agent growing" });
          turn?.growing.set(event.call_id, bubble);
          turn?.replies.push({ step: event.step, bubble });
          into.append(bubble);
        }
        bubble.append(event.text);
        break;
      }
      case "message": {
        const at = turn ? turn.replies.findIndex((r) => r.step === event.step) : -1;
        if (at >= 0) {
          const [{ bubble }] = turn.replies.splice(at, 1);
          fill(bubble, event.text);
          bubble.classList.remove("growing");
        } else into.append(h("div", { class: "bubble agent" }, event.text));
        break;
      }
      case "turn_completed": {
        const usage = event.usage ?? {};
        turn?.el.classList.replace("running", "done");
        // A reply that began but was never sent (the stream broke off, the call was invalid): not what the user got.
        for (const { bubble } of turn?.replies.splice(0) ?? []) {
          bubble.classList.replace("growing", "unsent");
          bubble.title = "never sent: the LLM's answer broke off";
        }
        if (turn)
          fill(
            turn.foot,
            `${event.stop_reason} · ${usage.llm_calls ?? 0} LLM calls · ${usage.prompt_tokens ?? 0}+${usage.completion_tokens ?? 0} tokens · turn ${shortId(event.turn_id)}`,
          );
        onTurnCompleted?.(event);
        break;
      }
      case "error":
        into.append(h("div", { class: "step error", role: "alert" }, `${event.code}: ${event.detail}`));
        break;
      default:
        into.append(h("div", { class: "step" }, JSON.stringify(event)));
    }
    if (stick) log.scrollTop = log.scrollHeight;
  }

  function step(kind, title, body, open) {
    return h("details", { class: `step ${kind}`, open }, h("summary", {}, title), body);
  }

  // Before the first message: say whether a model will answer, and whether it is the demo model.
  call("GET", ["service"])
    .then(({ llm }) => {
      const notice = !llm
        ? "No LLM is configured: chat answers 503, memory works. Connect one: see the README, \"Connect an LLM\"."
        : llm.demo
          ? `Demo model (${llm.model}): too small to remember reliably. Connect a real LLM: see the README, "Connect an LLM".`
          : null;
      if (notice) log.prepend(h("div", { class: `step ${llm ? "demo" : "error"} service-note`, role: "note" }, notice));
    })
    .catch(() => {}); // the socket says what is wrong with the connection

  connect();
  return {
    el,
    close() {
      closed = true;
      socket?.close();
    },
  };
}
