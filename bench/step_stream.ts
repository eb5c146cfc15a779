import type { EngineChunk } from "../engine/engine.ts";

/** What one generation's chunk stream gave: its tokens, steps and times. */
export interface StepStream {
  readonly tokens: number[];
  readonly steps: number;
  /** Tokens of the first step (the prefill's one token, plus any accepted drafts). */
  readonly firstTokens: number;
  /** performance.now() at the call, at the first step's chunk, after the last chunk. */
  readonly start: number;
  readonly first: number;
  readonly end: number;
}

/** Reads stream to its end, collecting the tokens of its step chunks and when they came. */
export async function readSteps(stream: ReadableStream<EngineChunk>): Promise<StepStream> {
  const start = performance.now();
  let first = NaN, steps = 0, firstTokens = 0;
  const tokens: number[] = [];
  for await (const c of stream) {
    if (c.type !== "step") continue;
    if (steps === 0) [first, firstTokens] = [performance.now(), c.tokens.length];
    tokens.push(...c.tokens);
    steps++;
  }
  return { tokens, steps, firstTokens, start, first, end: performance.now() };
}
