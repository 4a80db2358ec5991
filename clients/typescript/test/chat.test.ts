/** Chat against the scripted model (it answers `Noted: <message>` with send_message): the turn whole, the turn as a
 * stream of typed events, a turn's replay, and a retried turn that never runs twice. */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  EngramConnectionError,
  InvalidRequest,
  LLMError,
  type MessageDelta,
  NotFound,
  type TurnEvent,
} from "@engram/client";

import { engram, freshAgent, rejection } from "./support.js";

const TURN = ["turn_started", "tool_call", "tool_result", "message", "turn_completed"];

async function collect(events: AsyncIterable<TurnEvent>): Promise<TurnEvent[]> {
  const seen: TurnEvent[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

test("chat runs one turn: the reply, every event in order, the usage; turns.get replays it", async () => {
  const client = engram();
  const agent = await freshAgent();
  const turn = await client.chat(agent.id, "僕の名前は太郎です。");
  assert.equal(turn.status, "completed");
  assert.equal(turn.stop_reason, "end_turn");
  assert.equal(turn.reply, "Noted: 僕の名前は太郎です。");
  assert.deepEqual(
    turn.events.map((e) => e.type),
    TURN,
  );
  assert.ok(turn.events.every((e) => e.turn_id === turn.turn_id && e.agent_id === agent.id));
  assert.equal(turn.usage.llm_calls, 1);
  assert.deepEqual(await client.turns.get(agent.id, turn.turn_id), turn);
});

test("chatStream yields the reply in message_delta pieces, then the message, then turn_completed", async () => {
  const client = engram();
  const agent = await freshAgent();
  const message = "Tell me something long enough to come in several pieces, please.";
  const events = await collect(client.chatStream(agent.id, message));

  const types = events.map((e) => e.type);
  assert.equal(types[0], "turn_started");
  assert.equal(types.at(-1), "turn_completed");
  const deltas = events.filter((e): e is MessageDelta => e.type === "message_delta");
  assert.ok(deltas.length > 1, `expected several pieces, got ${deltas.length}`);
  const final = events.find((e) => e.type === "message");
  assert.ok(final?.type === "message");
  assert.ok(types.lastIndexOf("message_delta") < types.indexOf("message"));
  assert.equal(deltas.map((d) => d.text).join(""), final.text);
  assert.equal(final.text, `Noted: ${message}`);
  assert.ok(deltas.every((d) => d.call_id === deltas[0]?.call_id && d.step === final.step));
  const completed = events.at(-1);
  assert.ok(completed?.type === "turn_completed");
  assert.equal(completed.reply, final.text);
  assert.deepEqual(
    events.map((e) => e.seq),
    [...events.map((e) => e.seq)].sort((a, b) => a - b),
  );

  // Deltas are live only: the stored turn keeps the whole message
  const stored = await client.turns.get(agent.id, completed.turn_id);
  assert.deepEqual(
    stored.events,
    events.filter((e) => e.type !== "message_delta"),
  );
});

test("chatStream with deltas: false yields the stored events alone", async () => {
  const agent = await freshAgent();
  const events = await collect(engram().chatStream(agent.id, "hello", { deltas: false }));
  assert.deepEqual(
    events.map((e) => e.type),
    TURN,
  );
});

test("a refused turn throws before its first event: NotFound (404), InvalidRequest (422)", async () => {
  const client = engram();
  const unknown = crypto.randomUUID();
  await rejection(client.chat(unknown, "hello"), NotFound, 404, "not_found");
  await rejection(collect(client.chatStream(unknown, "hello")), NotFound, 404, "not_found");
  const agent = await freshAgent();
  await rejection(client.chat(agent.id, "x".repeat(32_001)), InvalidRequest, 422, "invalid_request");
});

test("a turn sent again under its idempotency key is the same turn, never run twice", async () => {
  const client = engram();
  const agent = await freshAgent();
  const key = crypto.randomUUID();
  const first = await client.chat(agent.id, "Remember the milk.", { idempotencyKey: key });
  const again = await client.chat(agent.id, "Remember the milk.", { idempotencyKey: key });
  const streamed = await collect(client.chatStream(agent.id, "Remember the milk.", { idempotencyKey: key }));
  assert.equal(again.turn_id, first.turn_id);
  assert.deepEqual(again.events, first.events);
  assert.deepEqual(streamed, first.events);
  const said = (await client.messages.list(agent.id, { include_context: true })).items.filter((m) => m.role === "user");
  assert.deepEqual(
    said.map((m) => m.content),
    ["Remember the milk."],
  );
  const reused = client.chat(agent.id, "Something else.", { idempotencyKey: key });
  assert.match((await rejection(reused, InvalidRequest, 422, "invalid_request")).message, /Idempotency-Key/);
});

test("a turn whose answer was lost on the way is sent again under its Idempotency-Key and runs once", async () => {
  const agent = await freshAgent();
  const keys: (string | null)[] = [];
  // In front of the served Engram, as a gateway: every request reaches it, but the first chat's answer is lost
  async function losingFirstAnswer(request: Request, init?: RequestInit): Promise<Response> {
    const response = await fetch(request, init);
    if (!request.url.endsWith("/chat")) return response;
    keys.push(request.headers.get("idempotency-key"));
    if (keys.length > 1) return response;
    await response.body?.cancel(); // the turn has run: a JSON answer comes once it ends
    const lost = JSON.stringify({ error: "bad_gateway", detail: "the answer was lost" });
    return new Response(lost, { status: 503, headers: { "Retry-After": "0" } });
  }
  const turn = await engram({ fetch: losingFirstAnswer }).chat(agent.id, "Hello?");
  assert.equal(turn.reply, "Noted: Hello?");
  assert.equal(keys.length, 2);
  assert.ok(keys[0]);
  assert.equal(keys[1], keys[0]);
  const said = (await engram().messages.list(agent.id, { include_context: true })).items;
  assert.deepEqual(
    said.filter((m) => m.role === "user").map((m) => m.content),
    ["Hello?"],
  );
  assert.deepEqual((await engram().turns.get(agent.id, turn.turn_id)).events, turn.events);
});

test("a turn the LLM fails is an LLMError (502) naming the turn, where the message is kept", async () => {
  const client = engram();
  const agent = await freshAgent();
  const error = await rejection(client.chat(agent.id, "Hello (the model fails)"), LLMError, 502, "llm_error");
  assert.ok(error.turnId);
  const turn = await client.turns.get(agent.id, error.turnId);
  assert.equal(turn.stop_reason, "llm_error");
  const started = turn.events[0];
  assert.ok(started?.type === "turn_started");
  assert.equal(started.message, "Hello (the model fails)");
});

test("a request that outlasts the timeout is an EngramConnectionError", async () => {
  const agent = await freshAgent();
  const error = await engram({ timeout: 1 })
    .chat(agent.id, "hello")
    .catch((reason: unknown) => reason);
  assert.ok(error instanceof EngramConnectionError, String(error));
  assert.match(error.message, /^TimeoutError: no answer within 1 ms/);
  // The turn, if it started, runs on: the next one waits for it, so that nothing is left running
  assert.equal((await engram().chat(agent.id, "again")).reply, "Noted: again");
});
