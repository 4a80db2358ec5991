/** Quotas: a key over its limit is RateLimited (429) with `retryAfter`, and the client waits that long and tries again
 * (a chat turn under the same idempotency key: one turn). Windows are the minute's, so both tests wait for the same
 * next minute, side by side. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Engram, RateLimited } from "@engram/client";

import { engram, freshAgent, issueKey, rejection, timed } from "./support.js";

/** Out of the last seconds of the minute, so that a limit reached now is still reached at the next request. */
async function awayFromMinuteEnd(): Promise<void> {
  const intoMinute = (Date.now() / 1000) % 60;
  if (intoMinute > 50) await new Promise((resolve) => setTimeout(resolve, (61 - intoMinute) * 1000));
}

describe("quotas", { concurrency: 2 }, () => {
  it("a request over the key's quota is RateLimited, then retried after its Retry-After", async () => {
    const apiKey = await issueKey({ requests_per_minute: 1 });
    await awayFromMinuteEnd();
    await new Engram({ apiKey }).agents.list();
    const limited = await rejection(
      new Engram({ apiKey, maxRetries: 0 }).agents.list(),
      RateLimited,
      429,
      "quota_exceeded",
    );
    assert.ok(
      limited.retryAfter !== null && limited.retryAfter >= 1 && limited.retryAfter <= 60,
      String(limited.retryAfter),
    );
    assert.match(limited.message, /quota of 1 requests per minute/);

    const [impatient] = await timed(() =>
      rejection(new Engram({ apiKey, maxRetryWait: 0 }).agents.list(), RateLimited, 429, "quota_exceeded"),
    );
    assert.ok(impatient < 1_000, `a Retry-After over maxRetryWait is raised at once, not after ${impatient} ms`);

    const [waited, page] = await timed(() => new Engram({ apiKey }).agents.list());
    assert.ok(Array.isArray(page.items));
    assert.ok(waited >= (limited.retryAfter - 1) * 1000, `waited ${waited} ms of ${limited.retryAfter} s`);
  });

  it("a chat turn over the key's quota is retried after its Retry-After and runs once", async () => {
    const agent = await freshAgent();
    const apiKey = await issueKey({ turns_per_minute: 1 });
    await awayFromMinuteEnd();
    await new Engram({ apiKey }).chat(agent.id, "first");
    const refused = new Engram({ apiKey, maxRetries: 0 }).chat(agent.id, "second");
    const limited = await rejection(refused, RateLimited, 429, "quota_exceeded");
    assert.ok(limited.retryAfter !== null);

    const [waited, turn] = await timed(() => new Engram({ apiKey }).chat(agent.id, "second"));
    assert.equal(turn.reply, "Noted: second");
    assert.ok(waited >= (limited.retryAfter - 1) * 1000, `waited ${waited} ms of ${limited.retryAfter} s`);
    const said = (await engram().messages.list(agent.id, { include_context: true })).items.filter(
      (m) => m.role === "user",
    );
    assert.deepEqual(
      said.map((m) => m.content),
      ["second", "first"],
    );
  });
});
