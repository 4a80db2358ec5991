/** The API's schemas under the names a caller uses, all taken from the generated `openapi.ts`. */
import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];

export type Agent = Schemas["AgentRead"];
export type AgentCreate = Schemas["AgentCreate"];
export type AgentPage = Schemas["Page_AgentRead_"];
export type AgentListOptions = NonNullable<operations["list_agents_v1_agents_get"]["parameters"]["query"]>;

export type CoreMemory = Schemas["CoreMemoryRead"];
export type CoreMemoryOptions = NonNullable<
  operations["get_core_memory_v1_agents__agent_id__memory_get"]["parameters"]["query"]
>;
export type Block = Schemas["BlockRead"];
export type BlockWrite = Schemas["BlockWrite"];

export type Passage = Schemas["PassageRead"];
export type PassageCreate = Schemas["PassageCreate"];
export type SearchOptions = Omit<
  NonNullable<operations["search_or_list_passages_v1_agents__agent_id__archival_get"]["parameters"]["query"]>,
  "query"
>;

export type HandedInMessage = Schemas["HandedInMessage"];
export type HandInRequest = Schemas["HandInRequest"];
export type HandIn = Schemas["HandInRead"];
export type Message = Schemas["MessageRead"];
export type MessagePage = Schemas["Page_MessageRead_"];
export type MessageListOptions = NonNullable<
  operations["list_messages_v1_agents__agent_id__messages_get"]["parameters"]["query"]
>;

export type RecollectionRequest = Schemas["RecollectionRequest"];
export type Recollection = Schemas["RecollectionRead"];
export type RecollectedMemory = Schemas["RecollectedMemory"];

/** A finished (or, under an idempotency key, still running) turn: `reply`, every event, token usage. */
export type ChatTurn = Schemas["ChatResponse"];
/** One event of a turn, told apart by its `type`. */
export type TurnEvent = ChatTurn["events"][number];
export type TurnStarted = Schemas["TurnStarted"];
export type Reasoning = Schemas["Reasoning"];
export type ToolCallEvent = Schemas["ToolCallEvent"];
export type ToolResultEvent = Schemas["ToolResultEvent"];
/** The next piece of the reply while the LLM writes it (streams only). */
export type MessageDelta = Schemas["MessageDelta"];
export type MessageEvent = Schemas["MessageEvent"];
export type TurnCompleted = Schemas["TurnCompleted"];
export type ErrorEvent = Schemas["ErrorEvent"];
