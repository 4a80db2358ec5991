/** Agents: create, get, list, delete; the client's defaults from the environment; the errors a caller meets first. */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AuthenticationError,
  Conflict,
  Engram,
  EngramConnectionError,
  InvalidRequest,
  NotFound,
  PermissionDenied,
} from "@engram/client";

import { engram, freshAgent, rejection, served } from "./support.js";

test("an agent is created, read, found by its name, listed and deleted", async () => {
  const client = engram();
  const name = `ts-${crypto.randomUUID()}`;
  const agent = await client.agents.create(name, { system: "Answer in one sentence." });
  assert.equal(agent.name, name);
  assert.equal(agent.system, "Answer in one sentence.");
  assert.deepEqual(agent.blocks.map((b) => b.label).sort(), ["human", "persona"]);

  assert.deepEqual(await client.agents.get(agent.id), agent);
  assert.deepEqual(await client.agents.find(name), agent);
  assert.deepEqual((await client.agents.list({ name })).items, [agent]);
  const page = await client.agents.list({ limit: 200 });
  assert.ok(page.items.some((a) => a.id === agent.id));

  assert.equal(await client.agents.delete(agent.id), undefined);
  assert.equal(await client.agents.find(name), null);
  await rejection(client.agents.get(agent.id), NotFound, 404, "not_found");
  await rejection(client.agents.delete(agent.id), NotFound, 404, "not_found");
});

test("a name taken is a Conflict (409); getOrCreate finds the agent, or creates it once", async () => {
  const client = engram();
  const agent = await freshAgent();
  const error = await rejection(client.agents.create(agent.name), Conflict, 409, "conflict");
  assert.match(error.message, /name/);
  assert.deepEqual(await client.agents.getOrCreate(agent.name), agent);

  const name = `ts-${crypto.randomUUID()}`;
  const racing = await Promise.all([1, 2, 3].map(() => client.agents.getOrCreate(name, { system: "Be brief." })));
  const [created] = racing;
  assert.ok(created);
  assert.equal(created.system, "Be brief.");
  assert.deepEqual(racing, [created, created, created]);
  await client.agents.delete(created.id);
});

test("an invalid agent is an InvalidRequest (422), naming the field", async () => {
  const error = await rejection(engram().agents.create("x".repeat(201)), InvalidRequest, 422, "invalid_request");
  assert.match(error.message, /name/);
});

test("the URL and the key come from ENGRAM_URL and ENGRAM_API_KEY, and options override them", async () => {
  const agent = await freshAgent(new Engram());
  assert.equal((await new Engram({ baseUrl: served.url, apiKey: served.apiKey }).agents.get(agent.id)).id, agent.id);

  const wrong = await rejection(
    new Engram({ apiKey: "not-a-key" }).agents.list(),
    AuthenticationError,
    401,
    "unauthorized",
  );
  assert.match(wrong.message, /invalid or revoked/);
  try {
    delete process.env.ENGRAM_API_KEY;
    const none = await rejection(new Engram().agents.list(), AuthenticationError, 401, "unauthorized");
    assert.match(none.message, /an API key is required/);
    process.env.ENGRAM_URL = "http://127.0.0.1:9"; // nothing listens there
    const unreachable = await new Engram({ apiKey: served.apiKey }).agents.list().catch((error: unknown) => error);
    assert.ok(unreachable instanceof EngramConnectionError, String(unreachable));
    assert.deepEqual([unreachable.status, unreachable.code], [0, "connection_error"]);
    assert.ok(unreachable.cause instanceof TypeError);
  } finally {
    Object.assign(process.env, { ENGRAM_URL: served.url, ENGRAM_API_KEY: served.apiKey });
  }
});

test("the admin key on an agent's route is PermissionDenied (403)", async () => {
  const error = await rejection(
    new Engram({ apiKey: served.adminKey }).agents.list(),
    PermissionDenied,
    403,
    "forbidden",
  );
  assert.match(error.message, /admin key/);
});
