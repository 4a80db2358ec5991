/** Server-sent events, as Engram streams a turn: `event: <type>` and `data: <json>` lines, a blank line after each. */
import { EngramConnectionError } from "./errors.js";

/** The `data` of each event of `body`, in order (`event:` lines and comments skipped: the data names its type). */
export async function* eventData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let pending = "";
  let data: string[] = [];
  for await (const text of decoded(body)) {
    const lines = (pending + text).split(/\r?\n/);
    pending = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "" && data.length > 0) {
        yield data.join("\n");
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
  }
}

/** The stream's text; a connection that breaks off is an `EngramConnectionError`. */
async function* decoded(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  try {
    yield* body.pipeThrough(new TextDecoderStream());
  } catch (error) {
    throw new EngramConnectionError(error);
  }
}
