/** `Engram`: the client. */
import { type Api, createApi, type EngramOptions, result } from "./api.js";
import { Agents, Archival, Memory, Messages, Turns } from "./resources.js";
import { eventData } from "./sse.js";
import type { ChatTurn, Recollection, RecollectionRequest, TurnEvent } from "./types.js";

export interface ChatOptions {
  /** Same key, same turn: a retry never runs a second one. Default: a new key per call, kept across its retries. */
  idempotencyKey?: string;
}

export interface ChatStreamOptions extends ChatOptions {
  /** `message_delta` events while the LLM writes the reply; default true. */
  deltas?: boolean;
}

export class Engram {
  readonly agents: Agents;
  readonly memory: Memory;
  readonly archival: Archival;
  readonly messages: Messages;
  readonly turns: Turns;
  private readonly api: Api;

  constructor(options: EngramOptions = {}) {
    this.api = createApi(options);
    this.agents = new Agents(this.api);
    this.memory = new Memory(this.api);
    this.archival = new Archival(this.api);
    this.messages = new Messages(this.api);
    this.turns = new Turns(this.api);
  }

  /** What a model should be handed before it answers `query` (or the conversation in `{ messages }`): core memory,
   * then the memories that bear on it, dated, in `text`; listed in `memories`. No LLM runs. */
  recall(agentId: string, request: string | RecollectionRequest): Promise<Recollection> {
    const body = typeof request === "string" ? { query: request } : request;
    return result(
      this.api.POST("/v1/agents/{agent_id}/recollection", { params: { path: { agent_id: agentId } }, body }),
    );
  }

  /** One turn of the agent (its LLM and memory tools): the reply, every event, token usage. Sent with an
   * Idempotency-Key, so that a retry, by this client or by you with the same key, never runs the turn twice. */
  async chat(agentId: string, message: string, options: ChatOptions = {}): Promise<ChatTurn> {
    const turn = await result(this.api.POST("/v1/agents/{agent_id}/chat", this.turn(agentId, message, options)));
    // A retry that found the turn still running answers with its state so far: its end is the answer
    return turn.status === "running" ? this.turns.wait(agentId, turn.turn_id) : turn;
  }

  /** One turn, its events as they happen: `turn_started`, the reply's `message_delta` pieces, tool calls and results,
   * `message`, then `turn_completed`. A refused turn throws (an `EngramError`) before the first event. */
  async *chatStream(agentId: string, message: string, options: ChatStreamOptions = {}): AsyncGenerator<TurnEvent> {
    const request = this.turn(agentId, message, options);
    const body = await result(
      this.api.POST("/v1/agents/{agent_id}/chat", {
        ...request,
        params: { ...request.params, query: { deltas: options.deltas ?? true } },
        headers: { Accept: "text/event-stream" },
        parseAs: "stream",
      }),
    );
    if (body === null) return;
    for await (const data of eventData(body)) {
      yield JSON.parse(data) as TurnEvent;
    }
  }

  private turn(agentId: string, message: string, options: ChatOptions) {
    const key = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    return { params: { path: { agent_id: agentId }, header: { "idempotency-key": key } }, body: { message } };
  }
}
