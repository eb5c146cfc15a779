/**
 * The engine's paged KV and scheduling against a deterministic fake model (testing/history_backend.ts) whose
 * logits depend on every token of the history read back through the block tables: blocks on demand, prefix-cache
 * hits, preemption and recompute, chunked prefill, and seeded sampling alone / batched / with speculation all give
 * the same tokens as the plain run, so any bookkeeping slip shows as different output.
 */
import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams, TokenLogprob } from "../../engine/engine.ts";
import { createEngine, type EngineOptions, type LlmEngine } from "../../engine/llm_engine.ts";
import { HistoryBackend, type HistoryBackendOptions } from "../../testing/history_backend.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";

const V = 200;
const tokenizer = new ToyTokenizer();

interface Run {
  tokens: number[];
  logprobs: TokenLogprob[];
  reason: string;
  cachedTokens: number | undefined;
}

async function collect(stream: ReadableStream<EngineChunk>): Promise<Run> {
  const run: Run = { tokens: [], logprobs: [], reason: "", cachedTokens: undefined };
  for await (const c of stream) {
    if (c.type === "step") {
      run.tokens.push(...c.tokens);
      run.logprobs.push(...(c.logprobs ?? []));
    } else {
      run.reason = c.reason;
      run.cachedTokens = c.cachedTokens;
    }
  }
  return run;
}

function sampling(p: Partial<SamplingParams> = {}): SamplingParams {
  return { temperature: 0, topP: 1, topK: 0, maxTokens: 24, stopTokens: [], stopStrings: [], logprobs: -1, ...p };
}

/** A prompt of `n` tokens from a seed (values below V). */
function prompt(seed: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => (seed * 31 + i * 7 + ((i * i) % 13)) % V);
}

function engineOn(
  backend: Partial<HistoryBackendOptions> = {},
  options: Partial<EngineOptions> = {},
  hostOptions: { maxBatchTokens?: number; maxSeqs?: number } = {},
): { engine: LlmEngine; backend: HistoryBackend } {
  const b = new HistoryBackend({ vocabSize: V, numBlocks: 512, blockSize: 16, maxPositions: 256, ...backend });
  const engine = createEngine(b.sampled(hostOptions), { tokenizer, maxNumSeqs: 16, ...options });
  return { engine, backend: b };
}

async function runAll(engine: LlmEngine, prompts: number[][], p: (i: number) => Partial<SamplingParams>) {
  return await Promise.all(
    prompts.map((pr, i) => collect(engine.generate({ id: `r${i}`, promptTokens: pr, sampling: sampling(p(i)) }))),
  );
}

Deno.test("blocks on demand: a request whose max_output_tokens is the whole context does not hold back others", async () => {
  // The pool holds one full context (16 blocks of 16 = 256 tokens) plus 4 blocks. Reserving each request's worst
  // case would run these one at a time; taking blocks as sequences grow runs them all at once.
  const { engine, backend } = engineOn({ numBlocks: 20 });
  try {
    const long = collect(
      engine.generate({ id: "long", promptTokens: prompt(1, 10), sampling: sampling({ maxTokens: 246 }) }),
    );
    const short = runAll(engine, Array.from({ length: 8 }, (_, i) => prompt(10 + i, 5)), () => ({ maxTokens: 6 }));
    const shorts = await short;
    assert.equal(engine.stats().running, 1, "the short requests finished while the long one still runs");
    const l = await long;
    assert.equal(l.tokens.length, 246);
    for (const s of shorts) assert.deepEqual([s.reason, s.tokens.length], ["length", 6]);
    assert.equal(backend.maxSeqs, 9, "all nine ran in the same steps");
    assert.equal(engine.metrics().peakRunning, 9);
    assert.equal(engine.metrics().preemptions, 0);
    assert.ok(engine.metrics().peakBlocksInUse <= 20);
  } finally {
    await engine.close();
  }
});

Deno.test("prefix cache: a repeated prompt gives identical tokens and logprobs, reports cached tokens, skips their prefill", async () => {
  const shared = prompt(3, 40);
  const p = { maxTokens: 12, logprobs: 3 };
  const { engine, backend } = engineOn();
  const { engine: plain } = engineOn({}, { enablePrefixCache: false });
  try {
    const reference = await collect(plain.generate({ id: "p", promptTokens: shared, sampling: sampling(p) }));
    assert.equal(reference.cachedTokens, 0);
    const first = await collect(engine.generate({ id: "a", promptTokens: shared, sampling: sampling(p) }));
    assert.equal(first.cachedTokens, 0, "nothing cached yet");
    const fedBefore = backend.fedTokens;
    const second = await collect(engine.generate({ id: "b", promptTokens: shared, sampling: sampling(p) }));
    // floor((40 - 1) / 16) = 2 full blocks are shared; the last prompt token is always computed.
    assert.equal(second.cachedTokens, 32);
    assert.equal(backend.fedTokens - fedBefore, 40 - 32 + 11, "only the uncached prompt tail and decodes were fed");
    for (const run of [first, second]) {
      assert.deepEqual(run.tokens, reference.tokens);
      assert.deepEqual(run.logprobs, reference.logprobs);
    }
    // A prompt sharing one full block and then diverging hits that block only.
    const forked = [...shared.slice(0, 20), ...prompt(9, 20)];
    const fork = await collect(engine.generate({ id: "c", promptTokens: forked, sampling: sampling(p) }));
    const forkRef = await collect(plain.generate({ id: "d", promptTokens: forked, sampling: sampling(p) }));
    assert.equal(fork.cachedTokens, 16);
    assert.deepEqual(fork.tokens, forkRef.tokens);
    const stats = engine.stats();
    assert.equal(stats.prefixCacheHitTokens, 48);
    assert.equal(stats.prefixCacheQueriedTokens, 120);
    assert.equal(engine.metrics().cachedPromptTokens, 48);
  } finally {
    await engine.close();
    await plain.close();
  }
});

Deno.test("prefix cache: concurrent requests with one system prompt share it and match the uncached run", async () => {
  const system = prompt(5, 48);
  const prompts = Array.from({ length: 6 }, (_, i) => [...system, ...prompt(20 + i, 3 + i)]);
  const { engine } = engineOn();
  const { engine: plain } = engineOn({}, { enablePrefixCache: false });
  try {
    const want = await runAll(plain, prompts, (i) => ({ maxTokens: 20, temperature: i % 2 ? 0.9 : 0, seed: i }));
    await collect(engine.generate({ id: "warm", promptTokens: system.concat([1]), sampling: sampling() }));
    const got = await runAll(engine, prompts, (i) => ({ maxTokens: 20, temperature: i % 2 ? 0.9 : 0, seed: i }));
    got.forEach((g, i) => {
      assert.deepEqual(g.tokens, want[i]!.tokens, `prompt ${i}`);
      assert.equal(g.cachedTokens, 48, `prompt ${i} reuses the system prompt's 3 blocks`);
    });
  } finally {
    await engine.close();
    await plain.close();
  }
});

Deno.test("preemption: when blocks run out the newest sequence is recomputed later, with identical output", async () => {
  const prompts = Array.from({ length: 5 }, (_, i) => prompt(40 + i, 20 + 3 * i));
  const p = (i: number): Partial<SamplingParams> => ({
    maxTokens: 120,
    temperature: i % 2 ? 0.8 : 0,
    seed: 100 + i,
    logprobs: 2,
  });
  const { engine: roomy } = engineOn();
  // 16 blocks = one full context: five sequences growing to ~9 blocks each must take turns.
  const { engine: tight } = engineOn({ numBlocks: 16 });
  try {
    const want = await runAll(roomy, prompts, p);
    const got = await runAll(tight, prompts, p);
    got.forEach((g, i) => {
      assert.deepEqual(g.tokens, want[i]!.tokens, `prompt ${i}`);
      assert.deepEqual(g.logprobs, want[i]!.logprobs, `prompt ${i} logprobs`);
      assert.equal(g.reason, "length");
    });
    assert.ok(tight.metrics().preemptions > 0, "the tight pool preempted");
    assert.equal(tight.stats().preemptions, tight.metrics().preemptions);
    assert.equal(roomy.metrics().preemptions, 0);
    assert.ok(tight.metrics().peakBlocksInUse <= 16);
  } finally {
    await roomy.close();
    await tight.close();
  }
});

Deno.test("chunked prefill: prompts fed in chunks under the token budget give the one-shot tokens", async () => {
  const prompts = Array.from({ length: 4 }, (_, i) => prompt(60 + i, 50 + 17 * i));
  const p = (i: number): Partial<SamplingParams> => ({ maxTokens: 16, temperature: i % 2 ? 1 : 0, seed: i });
  const { engine: oneShot, backend: whole } = engineOn();
  const { engine: chunked, backend: chunks } = engineOn({}, { maxNumBatchedTokens: 8, maxNumSeqs: 4 });
  try {
    const want = await runAll(oneShot, prompts, p);
    assert.ok(whole.maxFed >= 101, "the reference fed a whole prompt in one step");
    // A long prompt arriving while others decode: its chunks share steps with their decodes.
    const got = await runAll(chunked, prompts, p);
    got.forEach((g, i) => assert.deepEqual(g.tokens, want[i]!.tokens, `prompt ${i}`));
    assert.ok(chunks.maxFed <= 8, `fed ${chunks.maxFed} tokens of one sequence in a step`);
  } finally {
    await oneShot.close();
    await chunked.close();
  }
});

Deno.test("seeded sampling: identical alone, batched, and with speculation on or off", async () => {
  // Repetitive prompts so the n-gram proposer has drafts to offer.
  const prompts = Array.from({ length: 6 }, (_, i) => Array.from({ length: 30 }, (_, j) => (i * 5 + (j % 4)) % V));
  // A model that likes to continue the period-4 pattern (so drafts are often accepted) but is not certain.
  const logitsOf = (h: Int32Array, n: number, out: Float32Array) => {
    out.fill(0);
    out[h[n - 4]!] = 3;
    out[(h[n - 1]! + 1) % V] = 2;
  };
  const p = (i: number): Partial<SamplingParams> => ({ maxTokens: 40, temperature: 0.7 + 0.1 * i, seed: 7 + i });
  const plain = engineOn({ logitsOf });
  const spec = engineOn({ logitsOf }, { speculative: "ngram", numSpeculativeTokens: 4 });
  try {
    const alone: Run[] = [];
    for (const [i, pr] of prompts.entries()) {
      alone.push(await collect(plain.engine.generate({ id: `a${i}`, promptTokens: pr, sampling: sampling(p(i)) })));
    }
    const batched = await runAll(plain.engine, prompts, p);
    const speculative = await runAll(spec.engine, prompts, p);
    prompts.forEach((_, i) => {
      assert.deepEqual(batched[i]!.tokens, alone[i]!.tokens, `batched, prompt ${i}`);
      assert.deepEqual(speculative[i]!.tokens, alone[i]!.tokens, `speculative, prompt ${i}`);
    });
    const m = spec.engine.metrics();
    assert.ok(m.acceptedDrafts > 0 && m.acceptedDrafts < m.draftedTokens, `accepted ${m.acceptedDrafts}`);
    assert.ok(new Set(alone.map((r) => r.tokens.join())).size > 1);
  } finally {
    await plain.engine.close();
    await spec.engine.close();
  }
});

Deno.test("a backend error ends the step's sequences, releases them, and the pool is whole again", async () => {
  const { engine, backend } = engineOn({ numBlocks: 32, failAt: 4 });
  try {
    const runs = await runAll(engine, [prompt(1, 30), prompt(2, 30)], () => ({ maxTokens: 10 }));
    for (const r of runs) assert.equal(r.reason, "error");
    assert.equal(engine.stats().kvBlocksUsed, 0);
    assert.equal(backend.live.size, 0);
    const ok = await collect(engine.generate({ id: "x", promptTokens: prompt(3, 30), sampling: sampling() }));
    assert.equal(ok.reason, "length");
  } finally {
    await engine.close();
  }
});
