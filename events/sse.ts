/**
 * SSE framing: `event: <type>\ndata: <json>\n\n` per event (event name == JSON type, one single-line data field,
 * no `id:` and no `[DONE]`), one byte chunk per input array so a whole engine step is one network write.
 */
import type { ResponseStreamEvent } from "./types.ts";

export class SseEncoder {
  readonly #utf8 = new TextEncoder();

  /** The SSE text of events; JSON.stringify never emits raw newlines, so each data field is one line. */
  text(events: readonly ResponseStreamEvent[]): string {
    let s = "";
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      s += "event: " + e.type + "\ndata: " + JSON.stringify(e) + "\n\n";
    }
    return s;
  }

  encode(events: readonly ResponseStreamEvent[]): Uint8Array {
    return this.#utf8.encode(this.text(events));
  }
}

export function sseEncoder(): TransformStream<ResponseStreamEvent[], Uint8Array> {
  const core = new SseEncoder();
  return new TransformStream({
    transform(events, controller) {
      if (events.length > 0) controller.enqueue(core.encode(events));
    },
  });
}
