/** What the tests share: the served Engram (test/served.py sets its environment), fresh agents, issued keys. */
import assert from "node:assert/strict";
import { after } from "node:test";

import { type Agent, Engram, EngramError, type EngramOptions } from "@engram/client";

function environment(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is not set: run the tests as \`python test/served.py npm test\``);
  return value;
}

export const served = {
  url: environment("ENGRAM_URL"),
  apiKey: environment("ENGRAM_API_KEY"),
  adminKey: environment("ENGRAM_ADMIN_KEY"),
  tenantId: environment("ENGRAM_TENANT_ID"),
  urlWithoutLlm: environment("ENGRAM_URL_WITHOUT_LLM"),
};

/** This package's folder and the repository's, from build-test/test/ where the compiled tests run. */
export const packageRoot = new URL("../../", import.meta.url);
export const repositoryRoot = new URL("../../", packageRoot);

/** A client of the served Engram (its URL and key from the environment, as a user's would be). */
export function engram(options: EngramOptions = {}): Engram {
  return new Engram(options);
}

/** An agent of its own for a test, deleted after the file's tests. */
export async function freshAgent(client: Engram = engram()): Promise<Agent> {
  const agent = await client.agents.create(`ts-${crypto.randomUUID()}`);
  after(() => engram().agents.delete(agent.id));
  return agent;
}

/** An API key of the served tenant with quotas of its own (`requests_per_minute`, `turns_per_minute`). */
export async function issueKey(limits: Record<string, number>): Promise<string> {
  const admin = { Authorization: `Bearer ${served.adminKey}`, "Content-Type": "application/json" };
  const issued = await fetch(`${served.url}/v1/admin/tenants/${served.tenantId}/keys`, {
    method: "POST",
    headers: admin,
    body: JSON.stringify(limits),
  });
  assert.equal(issued.status, 201, await issued.clone().text());
  return ((await issued.json()) as { key: string }).key;
}

/** The error `promise` rejects with, checked to be a `Kind` that says what Engram said. */
export async function rejection<E extends EngramError>(
  promise: Promise<unknown>,
  Kind: new (...args: never[]) => E,
  status: number,
  code: string,
): Promise<E> {
  const error = await promise.then(
    () => assert.fail(`expected ${Kind.name}, but it succeeded`),
    (reason: unknown) => reason,
  );
  assert.ok(error instanceof Kind, `expected ${Kind.name}, got ${String(error)}`);
  assert.ok(error instanceof EngramError);
  assert.equal(error.name, Kind.name);
  assert.equal(error.status, status);
  assert.equal(error.code, code);
  assert.ok(error.message.length > 0);
  assert.match(error.requestId ?? "", /^[0-9a-f]{32}$/);
  return error;
}

/** Milliseconds `work` took, and what it gave. */
export async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const start = performance.now();
  const value = await work();
  return [performance.now() - start, value];
}
