/**
 * The split stage: engine chunks in, one token at a time out. An engine step may carry several tokens (accepted
 * speculative drafts); the parser must see each on its own push, in order — vLLM lost channel switches inside
 * speculative steps by parsing a step as one unit. The stage also turns the engine's id-based logprobs into the wire
 * `Logprob` once per token, the only logprob type past this point.
 *
 * The core writes into buffers it owns and reuses (the fused pipeline calls it once per step), so splitting a step
 * allocates nothing but the logprob objects it must hand on.
 */
import type { EngineChunk, TokenLogprob } from "../engine/engine.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import type { Logprob } from "../parsers/logprob.ts";

/** A step's tokens, one per parser push; `logprobs[i]` belongs to `tokens[i]` (absent when not requested). */
export type SplitChunk =
  | { readonly type: "tokens"; readonly tokens: readonly number[]; readonly logprobs?: readonly Logprob[] }
  | Extract<EngineChunk, { type: "finish" }>;

const utf8 = new TextDecoder();

export class SplitCore {
  readonly #tokenizer: Tokenizer;
  readonly #includeLogprobs: boolean;
  /** Token text and bytes by id, filled lazily (logprobs only). */
  readonly #tokenInfo = new Map<number, { token: string; bytes: readonly number[] }>();
  /** The last split step's tokens and logprobs: valid until the next `split`. */
  readonly tokens: number[] = [];
  readonly logprobs: Logprob[] = [];

  constructor(tokenizer: Tokenizer, includeLogprobs: boolean) {
    this.#tokenizer = tokenizer;
    this.#includeLogprobs = includeLogprobs;
  }

  /** Whether `logprobs` is filled by `split`. */
  get includeLogprobs(): boolean {
    return this.#includeLogprobs;
  }

  /** Splits one step into `tokens` (and `logprobs` when asked for); returns the token count. */
  split(chunk: Extract<EngineChunk, { type: "step" }>): number {
    const n = chunk.tokens.length;
    this.tokens.length = n;
    for (let i = 0; i < n; i++) this.tokens[i] = chunk.tokens[i]!;
    const lps = this.#includeLogprobs ? chunk.logprobs : undefined;
    this.logprobs.length = lps === undefined ? 0 : n;
    if (lps !== undefined) {
      for (let i = 0; i < n; i++) this.logprobs[i] = this.#wire(chunk.tokens[i]!, lps[i]!);
    }
    return n;
  }

  /** The stage's chunk for an engine chunk (fresh arrays: a stream consumer may keep them). */
  push(chunk: EngineChunk): SplitChunk {
    switch (chunk.type) {
      case "finish":
        return chunk;
      case "step":
        this.split(chunk);
        return this.#includeLogprobs && chunk.logprobs !== undefined
          ? { type: "tokens", tokens: [...this.tokens], logprobs: [...this.logprobs] }
          : { type: "tokens", tokens: [...this.tokens] };
      default: {
        const never: never = chunk;
        throw new Error(`unknown engine chunk ${JSON.stringify(never)}`);
      }
    }
  }

  #wire(token: number, lp: TokenLogprob): Logprob {
    const info = this.#info(token);
    return {
      token: info.token,
      bytes: info.bytes,
      logprob: lp.logprob,
      top_logprobs: lp.top.map((t) => {
        const ti = this.#info(t.id);
        return { token: ti.token, bytes: ti.bytes, logprob: t.logprob };
      }),
    };
  }

  #info(id: number): { token: string; bytes: readonly number[] } {
    let info = this.#tokenInfo.get(id);
    if (info === undefined) {
      const bytes = this.#tokenizer.tokenBytes(id);
      info = { token: utf8.decode(bytes), bytes: Array.from(bytes) };
      this.#tokenInfo.set(id, info);
    }
    return info;
  }
}

/** The split stage as a stream: one `tokens` chunk per engine step, the finish passed through. */
export function splitStage(tokenizer: Tokenizer, includeLogprobs = false): TransformStream<EngineChunk, SplitChunk> {
  const core = new SplitCore(tokenizer, includeLogprobs);
  return new TransformStream({
    transform(chunk, controller) {
      controller.enqueue(core.push(chunk));
    },
  });
}
