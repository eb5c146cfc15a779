/**
 * The parse stage: split tokens in, segments out, one parsed chunk per engine step. Each token reaches the parser on
 * its own `push`, in order, and the parser is flushed exactly once, at the finish.
 */
import type { FinishReason } from "../engine/engine.ts";
import type { Logprob } from "../parsers/logprob.ts";
import type { OutputParser, Segment } from "../parsers/segment.ts";
import type { AbortAsError, ParsedChunk } from "./parsed_chunk.ts";
import type { SplitChunk } from "./split_stage.ts";
import type { Usage } from "./types.ts";

export class ParseCore {
  readonly #parser: OutputParser;
  #reasoningTokens = 0;
  /** Tokens that produced no segment yet and were read outside reasoning; the next segments settle them. */
  #unsettled = 0;
  /** Whether the item the parser last opened (per its segments) is a reasoning item. */
  #itemIsReasoning = false;
  #finished = false;
  readonly #abortAs: (() => AbortAsError | undefined) | undefined;

  /**
   * `abortAs`, asked when the engine finishes with "abort": an error to report instead (the server stopping the
   * generation is a failure the client must see; a client's own cancel or disconnect stays "abort").
   */
  constructor(parser: OutputParser, abortAs?: () => AbortAsError | undefined) {
    this.#parser = parser;
    this.#abortAs = abortAs;
  }

  push(chunk: SplitChunk): ParsedChunk[] {
    if (this.#finished) return [];
    switch (chunk.type) {
      case "finish": {
        const as = chunk.reason === "abort" ? this.#abortAs?.() : undefined;
        return this.#finish(
          as === undefined ? chunk.reason : "error",
          chunk.promptTokens,
          chunk.outputTokens,
          chunk.cachedTokens ?? 0,
          as?.message ?? chunk.message,
          as?.code,
        );
      }
      case "tokens": {
        const segments: Segment[] = [];
        this.tokensInto(chunk.tokens, chunk.logprobs, chunk.tokens.length, segments);
        return [{ type: "segments", segments }];
      }
      default: {
        const never: never = chunk;
        throw new Error(`unknown split chunk ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * One engine step's segments, written over `buffer` from index 0; returns how many. The fused pipeline reuses one
   * buffer per response, so a step allocates no array of its own (entries past the count are stale, not cleared).
   */
  tokensInto(
    tokens: readonly number[],
    logprobs: readonly Logprob[] | undefined,
    count: number,
    buffer: Segment[],
  ): number {
    if (this.#finished) return 0;
    const parser = this.#parser;
    let n = 0;
    for (let i = 0; i < count; i++) {
      const token = tokens[i]!;
      const before = parser.inReasoning;
      const lp = logprobs?.[i];
      const produced = lp === undefined ? parser.push(token) : parser.push(token, lp);
      this.#count(before || parser.inReasoning, produced, true);
      for (let j = 0; j < produced.length; j++) buffer[n++] = produced[j]!;
    }
    return n;
  }

  /** End of the engine stream. Without a finish chunk the generation ended abnormally: report it as an error. */
  flush(): ParsedChunk[] {
    if (this.#finished) return [];
    return this.#finish("error", 0, 0, 0, "the engine stream ended without a finish");
  }

  #finish(
    reason: FinishReason,
    promptTokens: number,
    outputTokens: number,
    cachedTokens: number,
    message: string | undefined,
    code?: string,
  ): ParsedChunk[] {
    this.#finished = true;
    const out: ParsedChunk[] = [];
    const tail = this.#parser.flush();
    this.#count(false, tail, false);
    if (tail.length > 0) out.push({ type: "segments", segments: tail });
    const usage: Usage = {
      input_tokens: promptTokens,
      input_tokens_details: { cached_tokens: Math.min(cachedTokens, promptTokens), cache_write_tokens: 0 },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: Math.min(this.#reasoningTokens, outputTokens) },
      total_tokens: promptTokens + outputTokens,
    };
    out.push({
      type: "finish",
      reason,
      usage,
      ...(message === undefined ? {} : { message }),
      ...(code === undefined ? {} : { code }),
    });
    return out;
  }

  /**
   * Reasoning-token accounting. A token counts if it was read inside reasoning or opened it (e.g. `<think>`), or if
   * the segments it released carry reasoning (a parser may hold tokens back and release them later, e.g. a harmony
   * header recovered as reasoning text); held-back tokens are settled with the segments that release them.
   * `isToken` is false for the flush, which releases held tokens without reading one.
   */
  #count(inside: boolean, produced: readonly Segment[], isToken: boolean): void {
    let reasoning = false;
    for (let j = 0; j < produced.length; j++) {
      const seg = produced[j]!;
      if (seg.kind === "open") this.#itemIsReasoning = seg.item.type === "reasoning";
      if (this.#itemIsReasoning && seg.kind !== "close") reasoning = true;
    }
    if (produced.length === 0) {
      if (inside) this.#reasoningTokens++;
      else if (isToken) this.#unsettled++;
      return;
    }
    if (reasoning) this.#reasoningTokens += this.#unsettled;
    this.#unsettled = 0;
    if (isToken && (inside || reasoning)) this.#reasoningTokens++;
  }
}

/**
 * The parse stage as a stream: one `segments` chunk per engine step, then the flush segments and one finish.
 * `abortAs` as for ParseCore.
 */
export function parseStage(
  parser: OutputParser,
  abortAs?: () => AbortAsError | undefined,
): TransformStream<SplitChunk, ParsedChunk> {
  const core = new ParseCore(parser, abortAs);
  return new TransformStream({
    transform(chunk, controller) {
      for (const p of core.push(chunk)) controller.enqueue(p);
    },
    flush(controller) {
      for (const p of core.flush()) controller.enqueue(p);
    },
  });
}
