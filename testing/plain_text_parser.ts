/**
 * A minimal OutputParser for pipeline tests and benchmarks that must not depend on a model format: every non-special
 * token is visible message text, special tokens are dropped, and the one message opens at the first text and closes
 * implicitly at the flush. Logprobs of tokens that complete no text ride on the next delta.
 */
import type { Logprob } from "../parsers/logprob.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { IncrementalDetokenizer } from "../parsers/detokenizer.ts";
import type { OutputParser, Segment } from "../parsers/segment.ts";

export class PlainTextParser implements OutputParser {
  readonly inReasoning = false;
  readonly #tokenizer: Tokenizer;
  readonly #detok: IncrementalDetokenizer;
  #opened = false;
  #pending: Logprob[] = [];

  constructor(tokenizer: Tokenizer) {
    this.#tokenizer = tokenizer;
    this.#detok = new IncrementalDetokenizer(tokenizer);
  }

  push(token: number, logprob?: Logprob): Segment[] {
    if (this.#tokenizer.isSpecial(token)) return [];
    const text = this.#detok.push(token);
    if (logprob !== undefined) this.#pending.push(logprob);
    if (text === "") return [];
    const out: Segment[] = [];
    if (!this.#opened) {
      this.#opened = true;
      out.push({ kind: "open", item: { type: "message" } });
    }
    if (this.#pending.length === 0) out.push({ kind: "delta", text });
    else {
      out.push({ kind: "delta", text, logprobs: this.#pending });
      this.#pending = [];
    }
    return out;
  }

  flush(): Segment[] {
    const tail = this.#detok.flush();
    const out: Segment[] = [];
    if (tail !== "" && !this.#opened) {
      this.#opened = true;
      out.push({ kind: "open", item: { type: "message" } });
    }
    if (tail !== "") out.push({ kind: "delta", text: tail });
    if (this.#opened) out.push({ kind: "close", reason: "implicit" });
    return out;
  }
}
