/**
 * A test-only engine that replays a fixed token list, in a chosen chunking, as the engine contract's chunk stream.
 * It lets the pipeline and the HTTP layer be tested on exact model outputs and on every way a real engine (with or
 * without speculative decoding) may group tokens into steps.
 */
import {
  type Engine,
  type EngineChunk,
  type EngineStats,
  type FinishReason,
  type GenerateRequest,
  QueueFullError,
  type TokenLogprob,
} from "../engine/engine.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";

/** How tokens are grouped into engine steps: one per step, seeded random sizes in 1..max (default 8), or all in one. */
export type Chunking = "one" | "all" | { readonly seed: number; readonly max?: number };

/** A small deterministic PRNG (mulberry32) so seeded chunkings are reproducible across runs and machines. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Splits tokens into steps. Every step is non-empty; concatenating the steps gives back `tokens`. */
export function splitSteps(tokens: readonly number[], chunking: Chunking): number[][] {
  if (tokens.length === 0) return [];
  if (chunking === "all") return [[...tokens]];
  if (chunking === "one") return tokens.map((t) => [t]);
  const next = seededRandom(chunking.seed);
  const max = Math.max(1, chunking.max ?? 8);
  const steps: number[][] = [];
  for (let i = 0; i < tokens.length;) {
    const size = 1 + Math.floor(next() * max);
    steps.push(tokens.slice(i, i + size));
    i += size;
  }
  return steps;
}

export interface ReplayOptions {
  readonly finish?: FinishReason;
  readonly promptTokens?: number;
  readonly cachedTokens?: number;
  readonly message?: string;
  /** Same length as the token list; sliced along with the tokens. */
  readonly logprobs?: readonly TokenLogprob[];
}

/** The chunk list a replay produces: the steps, then exactly one finish chunk. */
export function scriptChunks(
  tokens: readonly number[],
  chunking: Chunking,
  options: ReplayOptions = {},
): EngineChunk[] {
  const chunks: EngineChunk[] = [];
  let at = 0;
  for (const step of splitSteps(tokens, chunking)) {
    const lp = options.logprobs?.slice(at, at + step.length);
    chunks.push(lp === undefined ? { type: "step", tokens: step } : { type: "step", tokens: step, logprobs: lp });
    at += step.length;
  }
  chunks.push({
    type: "finish",
    reason: options.finish ?? "stop",
    promptTokens: options.promptTokens ?? 0,
    outputTokens: tokens.length,
    ...(options.cachedTokens === undefined ? {} : { cachedTokens: options.cachedTokens }),
    ...(options.message === undefined ? {} : { message: options.message }),
  });
  return chunks;
}

/** Replays tokens as a stream of engine chunks. */
export function replayTokens(
  tokens: readonly number[],
  chunking: Chunking,
  options: ReplayOptions = {},
): ReadableStream<EngineChunk> {
  const chunks = scriptChunks(tokens, chunking, options);
  let i = 0;
  return new ReadableStream<EngineChunk>({
    pull(controller) {
      const chunk = chunks[i++];
      if (chunk === undefined) controller.close();
      else controller.enqueue(chunk);
    },
  }, { highWaterMark: 0 });
}

/** Deterministic fake logprobs: the sampled token's logprob and `top` alternatives with descending logprobs. */
export function fakeLogprobs(tokens: readonly number[], top: number, vocabSize: number): TokenLogprob[] {
  return tokens.map((id, i) => {
    const logprob = -((i % 7) + 1) / 8;
    const alternatives: { id: number; logprob: number }[] = [];
    for (let j = 0; j < top; j++) alternatives.push({ id: (id + 1 + j) % vocabSize, logprob: logprob - 1 - j });
    return { logprob, top: alternatives };
  });
}

export interface ScriptedEngineOptions {
  readonly tokenizer: Tokenizer;
  /** The tokens every generation produces (a function may pick them per request). */
  readonly script: readonly number[] | ((request: GenerateRequest) => readonly number[]);
  readonly chunking?: Chunking;
  /** Most generations in flight at once; one more makes `generate` throw `QueueFullError`. Default: unlimited. */
  readonly queueSize?: number;
  /** Milliseconds between steps, so tests can abort or cancel mid-generation. Default 0. */
  readonly stepDelayMs?: number;
  readonly modelId?: string;
  readonly maxModelLen?: number;
  /** Reported as `cachedTokens` in the finish chunk. */
  readonly cachedTokens?: number;
}

/**
 * An `Engine` that answers every request with its script. It honours `maxTokens` (finish "length"), stop tokens
 * (the stop token is reported in its step, finish "stop"), `signal` (finish "abort" at the next step) and the
 * logprobs request; stop strings are not checked.
 */
export class ScriptedEngine implements Engine {
  readonly modelId: string;
  readonly tokenizer: Tokenizer;
  readonly maxModelLen: number;
  readonly #options: ScriptedEngineOptions;
  #active = 0;
  #closed = false;
  #idle: (() => void)[] = [];
  /** Every request received, in order, for assertions. */
  readonly requests: GenerateRequest[] = [];

  constructor(options: ScriptedEngineOptions) {
    this.#options = options;
    this.tokenizer = options.tokenizer;
    this.modelId = options.modelId ?? "scripted";
    this.maxModelLen = options.maxModelLen ?? 4096;
  }

  generate(request: GenerateRequest): ReadableStream<EngineChunk> {
    if (this.#closed) throw new Error("engine is closed");
    if (this.#active >= (this.#options.queueSize ?? Infinity)) {
      throw new QueueFullError(`queue full: ${this.#active} generations in flight`);
    }
    this.requests.push(request);
    this.#active++;
    const script = typeof this.#options.script === "function" ? this.#options.script(request) : this.#options.script;
    const { tokens, reason } = this.#cut(script, request);
    const steps = splitSteps(tokens, this.#options.chunking ?? "one");
    const wantLogprobs = request.sampling.logprobs >= 0;
    const logprobs = wantLogprobs
      ? fakeLogprobs(tokens, request.sampling.logprobs, this.tokenizer.vocabSize)
      : undefined;
    const delay = this.#options.stepDelayMs ?? 0;
    const signal = request.signal;
    let step = 0;
    let sent = 0;
    let done = false;
    const finish = (controller: ReadableStreamDefaultController<EngineChunk>, why: FinishReason) => {
      controller.enqueue({
        type: "finish",
        reason: why,
        promptTokens: request.promptTokens.length,
        outputTokens: sent,
        ...(this.#options.cachedTokens === undefined ? {} : { cachedTokens: this.#options.cachedTokens }),
      });
      controller.close();
      this.#release();
      done = true;
    };
    return new ReadableStream<EngineChunk>({
      pull: async (controller) => {
        if (done) return;
        if (delay > 0 && step > 0) await new Promise((r) => setTimeout(r, delay));
        if (signal?.aborted) return finish(controller, "abort");
        const tokensOfStep = steps[step];
        if (tokensOfStep === undefined) return finish(controller, reason);
        const lp = logprobs?.slice(sent, sent + tokensOfStep.length);
        controller.enqueue(
          lp === undefined
            ? { type: "step", tokens: tokensOfStep }
            : { type: "step", tokens: tokensOfStep, logprobs: lp },
        );
        step++;
        sent += tokensOfStep.length;
      },
      cancel: () => {
        if (!done) this.#release();
        done = true;
      },
    }, { highWaterMark: 0 });
  }

  stats(): EngineStats {
    return { running: this.#active, waiting: 0, kvCacheUsage: 0 };
  }

  close(): Promise<void> {
    this.#closed = true;
    if (this.#active === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Applies stop tokens and maxTokens to the script, in generation order. */
  #cut(script: readonly number[], request: GenerateRequest): { tokens: number[]; reason: FinishReason } {
    const { maxTokens, stopTokens } = request.sampling;
    const tokens: number[] = [];
    for (const t of script) {
      if (tokens.length >= maxTokens) return { tokens, reason: "length" };
      tokens.push(t);
      if (stopTokens.includes(t)) return { tokens, reason: "stop" };
    }
    return { tokens, reason: "stop" };
  }

  #release(): void {
    this.#active--;
    if (this.#active === 0) { for (const resolve of this.#idle.splice(0)) resolve(); }
  }
}
