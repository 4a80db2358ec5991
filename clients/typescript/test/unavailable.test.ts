/** An Engram with no LLM: chat is ServiceUnavailable (503), raised at once: Engram's own 503 that names no
 * Retry-After would answer the same again. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { Engram, ServiceUnavailable } from "@engram/client";

import { rejection, served, timed } from "./support.js";

test("chat with no LLM configured is ServiceUnavailable (503), not tried again", async () => {
  const client = new Engram({ baseUrl: served.urlWithoutLlm }); // three retries, were it worth one
  const agent = await client.agents.getOrCreate("no-llm");
  const [elapsed, error] = await timed(() =>
    rejection(client.chat(agent.id, "hello"), ServiceUnavailable, 503, "service_unavailable"),
  );
  assert.match(error.message, /no LLM is configured/);
  assert.equal(error.retryAfter, null);
  assert.ok(elapsed < 1_000, `raised after ${elapsed} ms: its three retries' backoff would take 1.75 s or more`);
  const stream = client.chatStream(agent.id, "hello")[Symbol.asyncIterator]().next();
  await rejection(stream, ServiceUnavailable, 503, "service_unavailable");
});
