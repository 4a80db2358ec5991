/** The typed HTTP client every method goes through: openapi-fetch over the generated `paths`, so a call the API
 * does not have (a path, a parameter, a body field) does not compile; and the one way from a response to a result. */
import createClient, { type Client } from "openapi-fetch";

import { errorFrom } from "./errors.js";
import type { paths } from "./openapi.js";
import { type Fetch, retryingFetch } from "./retry.js";

export type Api = Client<paths, "application/json">;

export interface EngramOptions {
  /** The service's URL; default: the environment's `ENGRAM_URL`, else `http://localhost:8000`. */
  baseUrl?: string;
  /** An API key, sent as `Authorization: Bearer`; default: the environment's `ENGRAM_API_KEY` (none: loopback only). */
  apiKey?: string;
  /** Milliseconds a request may take until its answer's headers arrive (a chat turn's: until it ends); 60 000. */
  timeout?: number;
  /** Tries again after a 429 or 503 (after its `Retry-After`); 3. */
  maxRetries?: number;
  /** The longest `Retry-After`, in seconds, waited for; a longer one is raised at once; 60. */
  maxRetryWait?: number;
  /** The fetch to send requests with; default: the global one. */
  fetch?: Fetch;
}

function fromEnvironment(name: string): string | undefined {
  return globalThis.process?.env?.[name] || undefined;
}

export function createApi(options: EngramOptions): Api {
  const apiKey = options.apiKey ?? fromEnvironment("ENGRAM_API_KEY");
  const baseUrl = options.baseUrl ?? fromEnvironment("ENGRAM_URL") ?? "http://localhost:8000";
  const policy = {
    timeout: options.timeout ?? 60_000,
    maxRetries: options.maxRetries ?? 3,
    maxRetryWait: options.maxRetryWait ?? 60,
  };
  return createClient<paths, "application/json">({
    baseUrl,
    headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
    fetch: retryingFetch(policy, options.fetch),
  });
}

/** What a call answered, or the error it stands for. */
export async function result<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) throw errorFrom(response, error);
  return data as T;
}
