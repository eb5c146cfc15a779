/**
 * An output parser that ends the output after a number of tool calls: once the `max`-th call item has closed, every
 * later segment is dropped (the turn is over; what the model writes after it is not part of the response). Used for
 * `parallel_tool_calls: false` (one call) and `max_tool_calls` on formats where nothing else stops the model after a
 * call.
 */
import type { Logprob } from "./logprob.ts";
import type { ItemKind, OutputParser, Segment } from "./segment.ts";

function isCall(item: ItemKind): boolean {
  switch (item.type) {
    case "function_call":
    case "web_search_call":
    case "code_interpreter_call":
    case "mcp_call":
      return true;
    case "message":
    case "reasoning":
      return false;
    default: {
      const never: never = item;
      return never;
    }
  }
}

export class CallLimitParser implements OutputParser {
  readonly #inner: OutputParser;
  readonly #max: number;
  #calls = 0;
  #inCall = false;
  #ended = false;

  constructor(inner: OutputParser, max: number) {
    this.#inner = inner;
    this.#max = max;
  }

  get inReasoning(): boolean {
    return !this.#ended && this.#inner.inReasoning;
  }

  /** True once the last allowed call has closed. */
  get ended(): boolean {
    return this.#ended;
  }

  push(token: number, logprob?: Logprob): Segment[] {
    if (this.#ended) return [];
    return this.#pass(this.#inner.push(token, logprob));
  }

  flush(): Segment[] {
    if (this.#ended) return [];
    return this.#pass(this.#inner.flush());
  }

  #pass(segments: Segment[]): Segment[] {
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i]!;
      if (s.kind === "open") {
        this.#inCall = isCall(s.item);
        if (this.#inCall && this.#calls >= this.#max) {
          // No call allowed at all (max 0): the output ends before it.
          this.#ended = true;
          return segments.slice(0, i);
        }
      } else if (s.kind === "close" && this.#inCall) {
        this.#inCall = false;
        this.#calls++;
        if (this.#calls >= this.#max) {
          this.#ended = true;
          return segments.slice(0, i + 1);
        }
      }
    }
    return segments;
  }
}
