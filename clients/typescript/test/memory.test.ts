/** Core memory, archival memory, conversations handed in and recollection: what each method stores and reads back. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { Conflict, InvalidRequest, NotFound, PayloadTooLarge, PreconditionFailed } from "@engram/client";

import { engram, freshAgent, rejection } from "./support.js";

test("core memory is read with its versions and written only over the version read (412 otherwise)", async () => {
  const client = engram();
  const agent = await freshAgent();
  const human = (await client.memory.get(agent.id)).blocks.find((b) => b.label === "human");
  assert.ok(human);

  const written = await client.memory.put(agent.id, "human", "Name: Taro", { ifMatch: human.version });
  assert.equal(written.value, "Name: Taro");
  assert.equal(written.version, human.version + 1);
  assert.equal((await client.memory.get(agent.id)).blocks.find((b) => b.label === "human")?.value, "Name: Taro");

  const stale = client.memory.put(agent.id, "human", "Name: Jiro", { ifMatch: human.version });
  await rejection(stale, PreconditionFailed, 412, "precondition_failed");
  const made = await client.memory.put(agent.id, "projects", "Engram", { create: true, limit: 500 });
  assert.deepEqual([made.label, made.value, made.limit], ["projects", "Engram", 500]);
  await rejection(
    client.memory.put(agent.id, "projects", "again", { create: true }),
    PreconditionFailed,
    412,
    "precondition_failed",
  );
  await rejection(client.memory.put(agent.id, "nothing", "x"), NotFound, 404, "not_found");
});

test("archival memory stores passages, dated and tagged, and finds them by meaning and by words", async () => {
  const client = engram();
  const agent = await freshAgent();
  const tokyo = await client.archival.add(agent.id, "Aiko lives in Tokyo.", {
    occurred_at: "2023-04-01",
    tags: ["home"],
  });
  assert.equal(tokyo.content, "Aiko lives in Tokyo.");
  assert.deepEqual(tokyo.tags, ["home"]);
  assert.ok(tokyo.occurred_at.startsWith("2023-04-01T00:00:00"));
  assert.equal(tokyo.superseded_by, null);
  await client.archival.add(agent.id, "アイコの好きな食べ物は抹茶アイスです。");

  const where = await client.archival.search(agent.id, "Where does Aiko live?", { k: 1 });
  assert.deepEqual(
    where.map((p) => p.id),
    [tokyo.id],
  );
  assert.equal(typeof where[0]?.score, "number");
  const food = await client.archival.search(agent.id, "好きな食べ物", { k: 1 });
  assert.deepEqual(
    food.map((p) => p.content),
    ["アイコの好きな食べ物は抹茶アイスです。"],
  );
  const tagged = await client.archival.search(agent.id, "Aiko", { tags: ["home"] });
  assert.deepEqual(
    tagged.map((p) => p.id),
    [tokyo.id],
  );
});

test("a passage over a limit is an InvalidRequest (422); a body over the size cap, PayloadTooLarge (413)", async () => {
  const client = engram();
  const agent = await freshAgent();
  const long = await rejection(
    client.archival.add(agent.id, "x".repeat(20_001)),
    InvalidRequest,
    422,
    "invalid_request",
  );
  assert.match(long.message, /content/);
  await rejection(client.archival.add(agent.id, "x".repeat(1_000_001)), PayloadTooLarge, 413, "payload_too_large");
});

test("a conversation handed in is stored once under its ids, and listed newest first", async () => {
  const client = engram();
  const agent = await freshAgent();
  const said = [
    {
      role: "user" as const,
      content: "My sister Yuki works as a nurse in Sapporo.",
      occurred_at: "2024-05-01",
      id: "may-1:1",
    },
    {
      role: "assistant" as const,
      content: "That sounds like demanding work!",
      occurred_at: "2024-05-01",
      id: "may-1:2",
    },
  ];
  const first = await client.messages.add(agent.id, said);
  assert.deepEqual([first.stored, first.already_stored, first.memory_pass_id], [2, 0, null]);
  const again = await client.messages.add(agent.id, said);
  assert.deepEqual([again.stored, again.already_stored, again.message_ids], [0, 2, first.message_ids]);

  const listed = await client.messages.list(agent.id);
  assert.deepEqual(
    listed.items.map((m) => m.content),
    [said[1]?.content, said[0]?.content],
  );
  assert.deepEqual(
    listed.items.map((m) => m.id),
    [...first.message_ids].reverse(),
  );

  const other = [{ role: "user" as const, content: "Something else", id: "may-1:1" }];
  const conflict = await rejection(client.messages.add(agent.id, other), Conflict, 409, "conflict");
  assert.match(conflict.message, /may-1:1/);
});

test("a hand-in can queue a memory pass, a turn waited for with turns.wait and read with turns.get", async () => {
  const client = engram();
  const agent = await freshAgent();
  const handed = await client.messages.add(agent.id, [{ role: "user", content: "I moved to Osaka." }], {
    memory_pass: true,
  });
  assert.ok(handed.memory_pass_id);
  const pass = await client.turns.wait(agent.id, handed.memory_pass_id, { pollInterval: 100 });
  assert.equal(pass.status, "completed");
  assert.deepEqual(await client.turns.get(agent.id, pass.turn_id), pass);
  assert.equal(pass.turn_id, handed.memory_pass_id);
  const started = pass.events[0];
  assert.ok(started?.type === "turn_started");
  assert.equal(started.kind, "memory_pass");
  assert.equal(pass.events.at(-1)?.type, "turn_completed");
});

test("recall hands over the memories that bear on a question, or on a conversation", async () => {
  const client = engram();
  const agent = await freshAgent();
  const line = "来週の金曜日、京都で茶道の体験をします。";
  await client.messages.add(agent.id, [
    { role: "user", content: "My sister Yuki works as a nurse in Sapporo.", occurred_at: "2024-05-01" },
    { role: "user", content: line, occurred_at: "2024-05-01" },
  ]);

  const kyoto = await client.recall(agent.id, "What am I doing in Kyoto next week?");
  assert.equal(kyoto.query, "What am I doing in Kyoto next week?");
  assert.ok(kyoto.memories.some((m) => m.content === line && m.kind === "recall"));
  assert.match(kyoto.text, /\[conversation, 2024-05-01\]\n- user: 来週の金曜日/);
  assert.ok(kyoto.chars > 0 && kyoto.chars <= 1500);

  const conversation = await client.recall(agent.id, {
    messages: [{ role: "user", content: "What am I doing in Kyoto next week?" }],
    include_core: false,
    max_chars: 800,
  });
  assert.ok(conversation.memories.some((m) => m.content === line));
  assert.ok(!conversation.text.includes("<human"));
  await rejection(client.recall(agent.id, {}), InvalidRequest, 422, "invalid_request");
});
