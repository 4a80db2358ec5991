/** Agents, core memory, archival memory, recall memory and turns: one class each, over the typed HTTP client. */
import { type Api, result } from "./api.js";
import { Conflict } from "./errors.js";
import type {
  Agent,
  AgentCreate,
  AgentListOptions,
  AgentPage,
  Block,
  BlockWrite,
  ChatTurn,
  CoreMemory,
  CoreMemoryOptions,
  HandedInMessage,
  HandIn,
  HandInRequest,
  MessageListOptions,
  MessagePage,
  Passage,
  PassageCreate,
  SearchOptions,
} from "./types.js";

const path = (agentId: string) => ({ path: { agent_id: agentId } });

export class Agents {
  constructor(private readonly api: Api) {}

  /** A new agent (409 `Conflict` when the name is taken within the tenant); blocks default to `persona` and `human`. */
  create(name: string, options: Omit<AgentCreate, "name"> = {}): Promise<Agent> {
    return result(this.api.POST("/v1/agents", { body: { ...options, name } }));
  }

  get(agentId: string): Promise<Agent> {
    return result(this.api.GET("/v1/agents/{agent_id}", { params: path(agentId) }));
  }

  /** A page of the tenant's agents, oldest first (`next_cursor` for the next). */
  list(options: AgentListOptions = {}): Promise<AgentPage> {
    return result(this.api.GET("/v1/agents", { params: { query: options } }));
  }

  /** The agent named `name`, or null. */
  async find(name: string): Promise<Agent | null> {
    return (await this.list({ name })).items[0] ?? null;
  }

  /** The agent named `name`, created on the first call (one created meanwhile by another process is found). */
  async getOrCreate(name: string, options: Omit<AgentCreate, "name"> = {}): Promise<Agent> {
    const found = await this.find(name);
    if (found) return found;
    try {
      return await this.create(name, options);
    } catch (error) {
      const created = error instanceof Conflict ? await this.find(name) : null;
      if (created === null) throw error;
      return created;
    }
  }

  /** Deletes the agent and all of its memory. */
  async delete(agentId: string): Promise<void> {
    await result(this.api.DELETE("/v1/agents/{agent_id}", { params: path(agentId) }));
  }
}

export interface BlockPutOptions extends Omit<BlockWrite, "value"> {
  /** The block's `version` as read: a block changed since is not overwritten (412 `PreconditionFailed`). */
  ifMatch?: number;
  /** Create the block, which must not exist yet (412 when it does). */
  create?: boolean;
}

export class Memory {
  constructor(private readonly api: Api) {}

  /** Core memory: the agent's blocks, each with its `version`. */
  get(agentId: string, options: CoreMemoryOptions = {}): Promise<CoreMemory> {
    return result(this.api.GET("/v1/agents/{agent_id}/memory", { params: { ...path(agentId), query: options } }));
  }

  /** Writes a block's value (a new revision). */
  put(agentId: string, label: string, value: string, options: BlockPutOptions = {}): Promise<Block> {
    const { ifMatch, create, ...write } = options;
    const header = {
      ...(ifMatch === undefined ? {} : { "if-match": String(ifMatch) }),
      ...(create ? { "if-none-match": "*" } : {}),
    };
    return result(
      this.api.PUT("/v1/agents/{agent_id}/memory/{label}", {
        params: { path: { agent_id: agentId, label }, header },
        body: { ...write, value },
      }),
    );
  }
}

export class Archival {
  constructor(private readonly api: Api) {}

  /** Stores a passage (a near-duplicate of a stored one is that one). */
  add(agentId: string, content: string, options: Omit<PassageCreate, "content"> = {}): Promise<Passage> {
    return result(
      this.api.POST("/v1/agents/{agent_id}/archival", { params: path(agentId), body: { ...options, content } }),
    );
  }

  /** Current passages by meaning and by words, best first, each with its `score`. */
  async search(agentId: string, query: string, options: SearchOptions = {}): Promise<Passage[]> {
    const page = await result(
      this.api.GET("/v1/agents/{agent_id}/archival", { params: { ...path(agentId), query: { ...options, query } } }),
    );
    return page.items;
  }
}

export class Messages {
  constructor(private readonly api: Api) {}

  /** Hands in a conversation held elsewhere: stored in recall memory, embedded and dated as given (no LLM runs);
   * a message handed in before under its `id` is not stored again. `memory_pass` queues a memory pass over it. */
  add(agentId: string, messages: HandedInMessage[], options: Omit<HandInRequest, "messages"> = {}): Promise<HandIn> {
    return result(
      this.api.POST("/v1/agents/{agent_id}/messages", { params: path(agentId), body: { ...options, messages } }),
    );
  }

  /** A page of recall memory, newest first (`next_cursor` for the next); `{ query }` searches it. */
  list(agentId: string, options: MessageListOptions = {}): Promise<MessagePage> {
    return result(this.api.GET("/v1/agents/{agent_id}/messages", { params: { ...path(agentId), query: options } }));
  }
}

export class Turns {
  constructor(private readonly api: Api) {}

  /** A turn (a chat turn or a memory pass) with every event stored so far. */
  get(agentId: string, turnId: string): Promise<ChatTurn> {
    return result(
      this.api.GET("/v1/agents/{agent_id}/turns/{turn_id}", {
        params: { path: { agent_id: agentId, turn_id: turnId } },
      }),
    );
  }

  /** The turn once it has ended, read every `pollInterval` milliseconds meanwhile. */
  async wait(agentId: string, turnId: string, { pollInterval = 500 } = {}): Promise<ChatTurn> {
    for (;;) {
      const turn = await this.get(agentId, turnId);
      if (turn.status !== "running") return turn;
      await new Promise((resolve) => setTimeout(resolve, pollInterval));
    }
  }
}
