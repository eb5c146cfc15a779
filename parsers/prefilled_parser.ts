import type { Logprob } from "./logprob.ts";
import type { OutputParser, Segment } from "./segment.ts";

/**
 * An output parser that has already read tokens the prompt ends with (a forced prefill, e.g. the opening of a tool
 * call for `tool_choice: "required"`), so the model's first token continues the prefill's state. The prefill's
 * segments go out ahead of the first real token's, so a generation that stops at once still opens what the prefill
 * opened. An item the prefill opens and closes with no text (an empty `<think></think>`) is the prompt's, not the
 * model's: it is dropped rather than shown as an empty output item.
 */
export class PrefilledParser implements OutputParser {
  readonly #inner: OutputParser;
  #pending: Segment[];

  constructor(inner: OutputParser, prefill: readonly number[]) {
    this.#inner = inner;
    this.#pending = withoutEmptyItems(prefill.flatMap((token) => inner.push(token)));
  }

  get inReasoning(): boolean {
    return this.#inner.inReasoning;
  }

  push(token: number, logprob?: Logprob): Segment[] {
    return this.#take(this.#inner.push(token, logprob));
  }

  flush(): Segment[] {
    return this.#take(this.#inner.flush());
  }

  #take(segments: Segment[]): Segment[] {
    if (this.#pending.length === 0) return segments;
    const out = [...this.#pending, ...segments];
    this.#pending = [];
    return out;
  }
}

/** Drops every `open` directly followed by its `close`. */
function withoutEmptyItems(segments: readonly Segment[]): Segment[] {
  const out: Segment[] = [];
  for (const s of segments) {
    if (s.kind === "close" && out.at(-1)?.kind === "open") out.pop();
    else out.push(s);
  }
  return out;
}
