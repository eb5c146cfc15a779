/**
 * SSE framing: `event: <type>\ndata: <json>\n\n` per event (event name == JSON type, one single-line data field,
 * no `id:` and no `[DONE]`), one byte chunk per input array so a whole engine step is one network write.
 *
 * Delta events are most of a stream and differ only in `delta` (and `sequence_number`, and logprobs when asked), so
 * their frame up to `"delta":` is rendered once per item and reused. The result is byte-identical to
 * `JSON.stringify` of the event (same keys, same order — the builders' order with `sequence_number` last); the tests
 * pin that equality.
 */
import type { ResponseStreamEvent } from "./types.ts";

type DeltaEvent = Extract<ResponseStreamEvent, { delta: string }>;

export class SseEncoder {
  readonly #utf8 = new TextEncoder();
  /** Cache of the last delta frame prefix, keyed by event type and item id (fixed output/content index per item). */
  #prefixType = "";
  #prefixItem = "";
  #prefix = "";

  /** The SSE text of events; JSON.stringify never emits raw newlines, so each data field is one line. */
  text(events: readonly ResponseStreamEvent[]): string {
    let s = "";
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      s += "delta" in e ? this.#delta(e) : "event: " + e.type + "\ndata: " + JSON.stringify(e) + "\n\n";
    }
    return s;
  }

  encode(events: readonly ResponseStreamEvent[]): Uint8Array {
    return this.#utf8.encode(this.text(events));
  }

  #delta(e: DeltaEvent): string {
    if (e.type !== this.#prefixType || e.item_id !== this.#prefixItem) {
      this.#prefixType = e.type;
      this.#prefixItem = e.item_id;
      this.#prefix = "event: " + e.type + '\ndata: {"type":"' + e.type + '","item_id":' + JSON.stringify(e.item_id) +
        ',"output_index":' + e.output_index +
        ("content_index" in e ? ',"content_index":' + e.content_index : "") + ',"delta":';
    }
    const tail = "logprobs" in e
      ? ',"logprobs":' + (e.logprobs.length === 0 ? "[]" : JSON.stringify(e.logprobs)) + ',"sequence_number":'
      : ',"sequence_number":';
    return this.#prefix + JSON.stringify(e.delta) + tail + e.sequence_number + "}\n\n";
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
