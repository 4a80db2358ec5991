/** Errors as types, named as the Python client names them: Engram answers every error with `{"error": code,
 * "detail": text}`, and each status it answers with has its class, all of them `EngramError`. */
/** An answer that is not a success: `status`, Engram's error `code` (`not_found`, `agent_busy`…), its `message`, and
 * the `requestId` the server logged it under (`X-Request-ID`). */
export class EngramError extends Error {
  readonly status: number;
  readonly code: string;
  readonly requestId: string | null;

  constructor(status: number, code: string, message: string, requestId: string | null = null, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

/** 401: no API key, or one that is invalid or revoked. */
export class AuthenticationError extends EngramError {}
/** 403: the key may not do this (the admin key on an agent's route; no keys configured and not on loopback). */
export class PermissionDenied extends EngramError {}
/** 404: no such agent, passage, message or turn (or another tenant's). */
export class NotFound extends EngramError {}
/** 409: the name is taken, an id handed in before with another message, the agent busy with another turn… */
export class Conflict extends EngramError {}
/** 412: `ifMatch` named a version that is no longer current (or the block exists, creating it). */
export class PreconditionFailed extends EngramError {}
/** 413: a body over the service's size limit. */
export class PayloadTooLarge extends EngramError {}
/** 422: invalid input; the message names the field and what is wrong with it. */
export class InvalidRequest extends EngramError {}

/** 502: the LLM failed the turn `turnId`; the user's message is stored with it. */
export class LLMError extends EngramError {
  readonly turnId: string | null;

  constructor(status: number, code: string, message: string, requestId: string | null, turnId: string | null) {
    super(status, code, message, requestId);
    this.turnId = turnId;
  }
}

/** An answer that may be different later: `retryAfter`, the seconds its `Retry-After` said (null: it said none). */
class TransientError extends EngramError {
  readonly retryAfter: number | null;

  constructor(status: number, code: string, message: string, requestId: string | null, retryAfter: number | null) {
    super(status, code, message, requestId);
    this.retryAfter = retryAfter;
  }
}

/** 429: a quota is used up; `retryAfter` says for how long. */
export class RateLimited extends TransientError {}
/** 503: no LLM configured (for chat), the database unreachable, or the replica shutting down. */
export class ServiceUnavailable extends TransientError {}

/** Engram could not be reached, or no answer came in time (`status` 0; `cause`: what fetch threw). */
export class EngramConnectionError extends EngramError {
  constructor(cause: unknown) {
    const { name, message } = cause instanceof Error ? cause : { name: "Error", message: String(cause) };
    super(0, "connection_error", `${name}: ${message}`, null, { cause });
  }
}

const BY_STATUS: Readonly<Record<number, typeof EngramError>> = {
  401: AuthenticationError,
  403: PermissionDenied,
  404: NotFound,
  409: Conflict,
  412: PreconditionFailed,
  413: PayloadTooLarge,
  422: InvalidRequest,
};

/** `Retry-After` in seconds (a number of seconds or an HTTP date); null when absent or unreadable. */
export function retryAfterSeconds(headers: Headers): number | null {
  const value = headers.get("retry-after")?.trim();
  if (!value) return null;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, (date - Date.now()) / 1000);
}

export type ErrorBody = { error: string; detail: string; turn_id?: string };

/** Engram's error body, or null when the answer is not one (a proxy's). */
export function engramBody(body: unknown): ErrorBody | null {
  const { error, detail } = (body ?? {}) as Record<string, unknown>;
  return typeof error === "string" && typeof detail === "string" ? (body as ErrorBody) : null;
}

/** The error an answer that is not a success stands for, from its status, headers and (parsed) body. */
export function errorFrom(response: Response, body: unknown): EngramError {
  const engram = engramBody(body);
  const { status } = response;
  const code = engram?.error ?? "http_error";
  const message = engram?.detail ?? ((typeof body === "string" && body.slice(0, 500)) || response.statusText);
  const requestId = response.headers.get("x-request-id");
  if (status === 429 || status === 503) {
    const Kind = status === 429 ? RateLimited : ServiceUnavailable;
    return new Kind(status, code, message, requestId, retryAfterSeconds(response.headers));
  }
  if (status === 502) return new LLMError(status, code, message, requestId, engram?.turn_id ?? null);
  return new (BY_STATUS[status] ?? EngramError)(status, code, message, requestId);
}
