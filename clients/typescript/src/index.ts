/** @engram/client: a typed client for Engram, long-term memory for AI agents. */
export type { EngramOptions } from "./api.js";
export { type ChatOptions, type ChatStreamOptions, Engram } from "./client.js";
export {
  AuthenticationError,
  Conflict,
  EngramConnectionError,
  EngramError,
  InvalidRequest,
  LLMError,
  NotFound,
  PayloadTooLarge,
  PermissionDenied,
  PreconditionFailed,
  RateLimited,
  ServiceUnavailable,
} from "./errors.js";
export type { components, operations, paths } from "./openapi.js";
export type { Agents, Archival, BlockPutOptions, Memory, Messages, Turns } from "./resources.js";
export type * from "./types.js";
