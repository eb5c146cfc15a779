/**
 * gpt-oss under the engine's paging (tests/fixtures/checkpoints/gptoss-bf16: a sliding window of 20 positions on
 * layer 0, KV blocks of 16): prompts sharing a 37-token prefix hit the prefix cache, a token budget of 24 chunks the
 * prefills, and a pool of 14 blocks preempts and recomputes sequences — and every sequence's greedy and seeded tokens
 * and logprobs equal those of a roomy pool fed whole prompts with the cache off. The sliding layer keeps its KV in a
 * pool of its own bounded by the window: with 4 blocks of it, sequences of 81 positions (6 blocks) still give the
 * tokens of an engine keeping that layer's whole context in the main pool.
 */
import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams, TokenLogprob } from "../../engine/engine.ts";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { createEngine, type EngineOptions, type LlmEngine } from "../../engine/llm_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";

const DIR = new URL("../fixtures/checkpoints/gptoss-bf16", import.meta.url).pathname;
const V = 96;

interface Run {
  tokens: number[];
  logprobs: TokenLogprob[];
  cachedTokens: number | undefined;
}

async function collect(stream: ReadableStream<EngineChunk>): Promise<Run> {
  const run: Run = { tokens: [], logprobs: [], cachedTokens: undefined };
  for await (const c of stream) {
    if (c.type === "step") {
      run.tokens.push(...c.tokens);
      run.logprobs.push(...(c.logprobs ?? []));
    } else {
      assert.equal(c.reason, "length");
      run.cachedTokens = c.cachedTokens;
    }
  }
  return run;
}

async function open(
  numBlocks: number,
  options: Partial<EngineOptions>,
  sliding: { numSlidingBlocks?: number; slidingKvInMain?: boolean } = {},
): Promise<LlmEngine> {
  const backend = await NativeBackend.create(DIR, {
    threads: 2,
    maxSeqs: 8,
    maxBatchTokens: 256,
    numBlocks,
    ...sliding,
  });
  return createEngine(backend, { tokenizer: new ToyTokenizer(), maxNumSeqs: 8, maxModelLen: 128, ...options });
}

const shared = Array.from({ length: 37 }, (_, i) => (i * 29 + 5) % V);
const prompts = [
  shared,
  [...shared, 7, 8, 9],
  [...shared.slice(0, 33), 60, 61],
  Array.from({ length: 23 }, (_, i) => (i * 13 + 2) % V),
  Array.from({ length: 41 }, (_, i) => (i * 17 + 11) % V),
];

function sampling(i: number): SamplingParams {
  return {
    temperature: i % 2 ? 0.9 : 0,
    topP: 1,
    topK: 0,
    maxTokens: 40,
    stopTokens: [],
    stopStrings: [],
    logprobs: 2,
    seed: 500 + i,
  };
}

async function runAll(engine: LlmEngine, sequential: boolean): Promise<Run[]> {
  const one = (i: number) =>
    collect(engine.generate({ id: `r${i}`, promptTokens: prompts[i]!, sampling: sampling(i) }));
  if (!sequential) return await Promise.all(prompts.map((_, i) => one(i)));
  const runs: Run[] = [];
  for (let i = 0; i < prompts.length; i++) runs.push(await one(i));
  return runs;
}

Deno.test("native gpt-oss: prefix hits, chunked prefill and preemption give the plain run's tokens and logprobs", async () => {
  const roomy = await open(256, { enablePrefixCache: false });
  const cached = await open(256, {});
  const tight = await open(14, { maxNumBatchedTokens: 24 });
  try {
    const want = await runAll(roomy, false);
    const hits = await runAll(cached, true); // one after another, so each later prompt finds the shared blocks
    const squeezed = await runAll(tight, false);
    for (let i = 0; i < prompts.length; i++) {
      assert.deepEqual(hits[i]!.tokens, want[i]!.tokens, `prefix cache, prompt ${i}`);
      assert.deepEqual(hits[i]!.logprobs, want[i]!.logprobs, `prefix cache, prompt ${i} logprobs`);
      assert.deepEqual(squeezed[i]!.tokens, want[i]!.tokens, `chunked + preempted, prompt ${i}`);
      assert.deepEqual(squeezed[i]!.logprobs, want[i]!.logprobs, `chunked + preempted, prompt ${i} logprobs`);
    }
    assert.ok((hits[1]!.cachedTokens ?? 0) >= 32 && (hits[2]!.cachedTokens ?? 0) >= 32, "shared prefix blocks hit");
    assert.ok(tight.metrics().preemptions > 0, "the tight pool preempted");
    assert.equal(roomy.metrics().preemptions, 0);
  } finally {
    await roomy.close();
    await cached.close();
    await tight.close();
  }
});

Deno.test("native gpt-oss: a sliding pool of 4 blocks serves 81-position sequences with the whole-pool tokens", async () => {
  const whole = await NativeBackend.create(DIR, { threads: 2, numBlocks: 64, slidingKvInMain: true });
  const bounded = await NativeBackend.create(DIR, { threads: 2, numBlocks: 64, numSlidingBlocks: 4 });
  try {
    assert.equal(whole.info.slidingWindow, 0);
    assert.equal(bounded.info.slidingWindow, 20);
    assert.equal(bounded.info.numSlidingBlocks, 4);
    // One of two layers slides: the main pool holds half of each block, the sliding pool 4 blocks of that half.
    assert.equal(bounded.info.kvBytes - bounded.info.slidingKvBytes, whole.info.kvBytes / 2);
    assert.equal(bounded.info.slidingKvBytes, (whole.info.kvBytes / 2) * 4 / 64);
  } finally {
    await whole.close();
    await bounded.close();
  }
  const reference = await open(256, { enablePrefixCache: false }, { slidingKvInMain: true });
  const small = await open(256, {}, { numSlidingBlocks: 4 });
  try {
    const want = await runAll(reference, false);
    const got = await runAll(small, false);
    for (let i = 0; i < prompts.length; i++) {
      assert.deepEqual(got[i]!.tokens, want[i]!.tokens, `bounded sliding pool, prompt ${i}`);
      assert.deepEqual(got[i]!.logprobs, want[i]!.logprobs, `bounded sliding pool, prompt ${i} logprobs`);
      assert.equal(got[i]!.tokens.length, 40);
    }
    assert.ok(small.metrics().preemptions > 0, "the sliding pool ran short and preempted");
  } finally {
    await reference.close();
    await small.close();
  }
});
