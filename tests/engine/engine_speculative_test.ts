/**
 * Engine-level speculative sampling against a synthetic Markov-chain backend whose exact output distribution is
 * known: with n-gram drafts verified by rejection sampling, every generated position must keep the target marginal.
 * The backend also checks the cache protocol (cachedLength, rollback) on every call.
 */
import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams } from "../../engine/engine.ts";
import { createEngine } from "../../engine/llm_engine.ts";
import { HistoryBackend } from "../../testing/history_backend.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";

const V = 4;
/** logits[t] = next-token logits after token t (temperature 1). */
const LOGITS = [
  [2.0, 0.5, 0.1, -1.0],
  [0.3, 1.2, 0.8, 0.0],
  [-0.5, 0.4, 1.5, 0.9],
  [1.0, 1.0, -0.2, 0.6],
];

/** A Markov chain read through the block tables, so rollback of rejected drafts is checked on every step. */
function markovBackend(): HistoryBackend {
  return new HistoryBackend({
    vocabSize: V,
    numBlocks: 64 * 2 * 2,
    blockSize: 8,
    logitsOf: (history, n, out) => out.set(LOGITS[history[n - 1]! % V]!),
  });
}

function softmax(row: readonly number[]): number[] {
  const m = Math.max(...row);
  const e = row.map((x) => Math.exp(x - m));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

const sampling = (seed: number, maxTokens: number): SamplingParams => ({
  temperature: 1,
  topP: 1,
  topK: 0,
  seed,
  maxTokens,
  stopTokens: [],
  stopStrings: [],
  logprobs: -1,
});

async function generateMany(speculative: "ngram" | "none", n: number, len: number) {
  const backend = markovBackend();
  const engine = createEngine(backend.sampled({ maxDrafts: 3 }), {
    tokenizer: new ToyTokenizer(),
    maxNumSeqs: 64,
    maxQueue: n,
    speculative,
    numSpeculativeTokens: 3,
    ngram: { minN: 1, maxN: 2 },
    eosTokenIds: [],
  });
  const outs = await Promise.all(Array.from({ length: n }, async (_, i) => {
    // The prompt repeats so n-gram drafts exist from the first decode step.
    const stream = engine.generate({
      id: `s${i}`,
      promptTokens: [0, 1, 2, 3, 0, 1, 2, 3, 0],
      sampling: sampling(1000 + i, len),
    });
    const tokens: number[] = [];
    for await (const c of stream as ReadableStream<EngineChunk>) if (c.type === "step") tokens.push(...c.tokens);
    return tokens;
  }));
  const metrics = engine.metrics();
  await engine.close();
  assert.equal(backend.live.size, 0, "every sequence released its cache");
  return { outs, metrics, backend };
}

Deno.test("speculative sampling through the engine keeps every position's exact marginal", async () => {
  const n = 3000;
  const len = 5;
  const { outs, metrics, backend } = await generateMany("ngram", n, len);
  assert.ok(metrics.draftedTokens > n, "drafts were proposed");
  assert.ok(metrics.acceptedDrafts > 0 && metrics.acceptedDrafts < metrics.draftedTokens);
  assert.ok(backend.maxFed >= 2, "verify steps fed drafts");
  // Exact marginals of a Markov chain started after token 0.
  let dist = softmax(LOGITS[0]!);
  const T = LOGITS.map(softmax);
  for (let k = 0; k < len; k++) {
    const counts = new Array(V).fill(0);
    for (const o of outs) {
      assert.equal(o.length, len);
      counts[o[k]!]++;
    }
    const chi = dist.reduce((s, p, v) => s + (counts[v] - n * p) ** 2 / (n * p), 0);
    // 0.1% critical value of chi-square with 3 degrees of freedom; seeds are fixed, so this never flakes.
    assert.ok(
      chi < 16.27,
      `position ${k}: chi2 ${chi.toFixed(2)} counts ${counts} expected ${dist.map((p) => (n * p).toFixed(0))}`,
    );
    dist = dist.map((_, j) => dist.reduce((s, p, i) => s + p * T[i]![j]!, 0));
  }
});

Deno.test("speculation keeps the cache protocol and per-request determinism", async () => {
  const a = await generateMany("ngram", 50, 12);
  const b = await generateMany("ngram", 50, 12);
  assert.deepEqual(a.outs, b.outs, "same seeds, same outputs");
  assert.ok(a.metrics.steps < 12 * 50);
});
