/** How requests are sent again: a 429 or 503 is tried again after the `Retry-After` the server sends, the same
 * request each time (a chat turn keeps its Idempotency-Key, so it never runs twice). An answer that names no wait is
 * tried again after a growing backoff, unless it is Engram's own: Engram names a wait wherever one helps, and its
 * 503 without one (no LLM configured) would answer the same again. */
import { EngramConnectionError, engramBody, retryAfterSeconds } from "./errors.js";

const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 503]);

export interface RetryPolicy {
  /** Tries after the first. */
  maxRetries: number;
  /** The longest wait, in seconds, the client accepts: a server asking for more gets its error raised at once. */
  maxRetryWait: number;
  /** Milliseconds an attempt may take until the response's headers arrive (a chat turn's: until it ends). */
  timeout: number;
}

export type Fetch = (request: Request, init?: RequestInit) => Promise<Response>;

/** A fetch that applies `policy` to each request it is given. */
export function retryingFetch(
  policy: RetryPolicy,
  fetchImpl: Fetch = globalThis.fetch,
): (request: Request) => Promise<Response> {
  return async (request) => {
    for (let attempt = 0; ; attempt++) {
      const response = await attemptOnce(fetchImpl, request.clone(), policy.timeout);
      const wait = await waitBeforeRetry(response, attempt, policy);
      if (wait === null) return response;
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  };
}

/** Seconds to wait before trying `response`'s request again, or null: it is the answer. */
async function waitBeforeRetry(response: Response, attempt: number, policy: RetryPolicy): Promise<number | null> {
  if (!RETRIED_STATUSES.has(response.status) || attempt >= policy.maxRetries) return null;
  let wait = retryAfterSeconds(response.headers);
  if (wait === null) {
    const body: unknown = await response
      .clone()
      .json()
      .catch(() => null);
    if (engramBody(body) !== null) return null;
    wait = 0.5 * 2 ** attempt * (0.5 + Math.random() / 2);
  }
  return wait <= policy.maxRetryWait ? wait : null;
}

async function attemptOnce(fetchImpl: Fetch, request: Request, timeout: number): Promise<Response> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException(`no answer within ${timeout} ms`, "TimeoutError")),
    timeout,
  );
  try {
    return await fetchImpl(request, { signal: controller.signal });
  } catch (error) {
    throw new EngramConnectionError(error);
  } finally {
    clearTimeout(timer); // the headers are in: reading the body (a stream's events) takes the time it takes
  }
}
