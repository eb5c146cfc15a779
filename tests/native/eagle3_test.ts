/**
 * EAGLE-3 speculation through the engine on the native library: the random 96-token target with the committed random
 * head (tests/fixtures/eagle3/head-a), greedy and seeded sampling, gives exactly the tokens of plain decoding — one
 * request alone, eight batched, with prefill chunked by a small token budget, with sequences preempted by a small KV
 * pool, and with a repeated prompt served from the prefix cache — while drafts are proposed and verified. The heads
 * trained for the bundled models keep their greedy answers and have most drafts accepted.
 */
import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams } from "../../engine/engine.ts";
import { createEngine, type EngineMetrics } from "../../engine/llm_engine.ts";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { loadModel } from "../../prompt/load_model.ts";
import { openEngine } from "../../engine/open_engine.ts";

const DIR = new URL("../fixtures/checkpoints/llama3-fp32", import.meta.url).pathname;
const HEAD = new URL("../fixtures/eagle3/head-a", import.meta.url).pathname;

interface Run {
  readonly outs: number[][];
  readonly metrics: EngineMetrics;
}

const prompts = Array.from({ length: 8 }, (_, i) => Array.from({ length: 9 + 3 * i }, (_, j) => (i * 31 + j * 7) % 96));

function sampling(i: number, temperature: number): SamplingParams {
  return {
    temperature,
    topP: 1,
    topK: 0,
    seed: 100 + i,
    maxTokens: 24,
    stopTokens: [],
    stopStrings: [],
    logprobs: -1,
  };
}

async function run(
  speculative: "eagle3" | "none",
  opts: { numBlocks: number; budget?: number; temperature: number; batch: readonly number[] },
): Promise<Run> {
  const backend = await NativeBackend.create(DIR, {
    threads: 2,
    maxSeqs: 8,
    maxBatchTokens: 256,
    numBlocks: opts.numBlocks,
    blockSize: 4,
    maxDrafts: 3,
    ...(speculative === "eagle3" ? { draftModelDir: HEAD } : {}),
  });
  const engine = createEngine(backend, {
    tokenizer: new ToyTokenizer(),
    maxNumSeqs: 8,
    speculative,
    numSpeculativeTokens: 3,
    eosTokenIds: [],
    ...(opts.budget === undefined ? {} : { maxNumBatchedTokens: opts.budget }),
  });
  try {
    const outs = await Promise.all(opts.batch.map(async (i) => {
      const stream = engine.generate({
        id: `r${i}`,
        promptTokens: prompts[i]!,
        sampling: sampling(i, opts.temperature),
      });
      const tokens: number[] = [];
      for await (const c of stream as ReadableStream<EngineChunk>) if (c.type === "step") tokens.push(...c.tokens);
      return tokens;
    }));
    return { outs, metrics: engine.metrics() };
  } finally {
    await engine.close();
  }
}

const all = [0, 1, 2, 3, 4, 5, 6, 7];
/** The trained heads' share of accepted drafts on these questions sits well above this (README, EAGLE-3 figures). */
const ACCEPTED_AT_LEAST = 0.5;

for (const temperature of [0, 0.8]) {
  Deno.test(`native eagle3 speculation gives plain decoding's tokens (temperature ${temperature})`, async () => {
    const plain = await run("none", { numBlocks: 256, temperature, batch: all });
    // Alone.
    for (const i of [0, 5]) {
      const alone = await run("eagle3", { numBlocks: 256, temperature, batch: [i] });
      assert.deepEqual(alone.outs[0], plain.outs[i], `request ${i} alone`);
      assert.ok(alone.metrics.draftedTokens > 0, "drafts were verified");
    }
    // Batched; then with prefill chunked by a 12-token budget; then in a pool too small for all eight.
    const batched = await run("eagle3", { numBlocks: 256, temperature, batch: all });
    assert.deepEqual(batched.outs, plain.outs, "batched");
    const chunked = await run("eagle3", { numBlocks: 256, budget: 12, temperature, batch: all });
    assert.deepEqual(chunked.outs, plain.outs, "chunked prefill");
    const tight = await run("eagle3", { numBlocks: 40, temperature, batch: all });
    assert.ok(tight.metrics.preemptions > 0, `sequences were preempted (${tight.metrics.preemptions})`);
    assert.deepEqual(tight.outs, plain.outs, "preempted");
  });
}

Deno.test("native eagle3 speculation on a prompt served from the prefix cache", async () => {
  const plain = await run("none", { numBlocks: 256, temperature: 0, batch: [7] });
  const backend = await NativeBackend.create(DIR, {
    threads: 2,
    maxSeqs: 8,
    maxBatchTokens: 256,
    numBlocks: 256,
    blockSize: 4,
    maxDrafts: 3,
    draftModelDir: HEAD,
  });
  const engine = createEngine(backend, {
    tokenizer: new ToyTokenizer(),
    maxNumSeqs: 8,
    speculative: "eagle3",
    numSpeculativeTokens: 3,
    eosTokenIds: [],
  });
  try {
    const once = async () => {
      const tokens: number[] = [];
      const stream = engine.generate({ id: "p", promptTokens: prompts[7]!, sampling: sampling(7, 0) });
      for await (const c of stream as ReadableStream<EngineChunk>) if (c.type === "step") tokens.push(...c.tokens);
      return tokens;
    };
    assert.deepEqual(await once(), plain.outs[0]);
    assert.deepEqual(await once(), plain.outs[0]);
    assert.ok(engine.metrics().cachedPromptTokens > 0, "the second request reused cached blocks");
  } finally {
    await engine.close();
  }
});

/**
 * The head trained for each bundled model (models/<name>-eagle3): served with it, greedy answers to the benchmark's
 * kind of questions are the same tokens as without speculation, and its drafts are mostly accepted.
 */
for (const name of ["rill-tiny-harmony", "rill-tiny-chatml"]) {
  Deno.test(`native eagle3: the trained head of ${name} keeps greedy output and is accepted`, async () => {
    const dir = new URL(`../../models/${name}`, import.meta.url).pathname;
    const model = await loadModel(dir);
    const questions = ["What is 23 + 59?", "What is the capital of Chile?", "Repeat the phrase 'red' 5 times."];
    const prompts = questions.map((q) =>
      model.format.render({ messages: [{ role: "user", content: q }], tools: [], toolChoice: "auto" })
    );
    const answer = async (speculative: "eagle3" | "none") => {
      const engine = await openEngine({
        modelDir: dir,
        model,
        maxModelLen: 512,
        maxNumSeqs: 4,
        speculative,
        numSpeculativeTokens: 3,
        backend: {
          kind: "native",
          threads: 2,
          ...(speculative === "eagle3" ? { draftModelDir: `${dir}-eagle3`, draftKind: "eagle3" as const } : {}),
        },
      });
      try {
        const outs = await Promise.all(prompts.map(async (promptTokens, i) => {
          const tokens: number[] = [];
          const stream = engine.generate({
            id: `q${i}`,
            promptTokens,
            sampling: { ...sampling(i, 0), maxTokens: 96, stopTokens: model.format.stopTokens },
          });
          for await (const c of stream as ReadableStream<EngineChunk>) if (c.type === "step") tokens.push(...c.tokens);
          return tokens;
        }));
        return { outs, metrics: engine.metrics() };
      } finally {
        await engine.close();
      }
    };
    const off = await answer("none");
    const on = await answer("eagle3");
    assert.deepEqual(on.outs, off.outs);
    const rate = on.metrics.acceptedDrafts / on.metrics.draftedTokens;
    assert.ok(rate > ACCEPTED_AT_LEAST, `${(100 * rate).toFixed(0)}% of drafts accepted`);
  });
}
