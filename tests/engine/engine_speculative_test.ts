/**
 * Engine-level speculative sampling against a synthetic Markov-chain backend whose exact output distribution is
 * known: with n-gram drafts, or a draft model's proposals (testing/proposing_backend.ts), verified by rejection
 * sampling, every generated position must keep the target marginal. The backend also checks the cache protocol
 * (cachedLength, rollback) on every call; the proposing wrapper checks the lookahead slots of every proposal.
 */
import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams } from "../../engine/engine.ts";
import { createEngine } from "../../engine/llm_engine.ts";
import { hashedLogits, HistoryBackend, type LogitsOf } from "../../testing/history_backend.ts";
import { ProposingBackend } from "../../testing/proposing_backend.ts";
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

/** A draft model that knows the chain only roughly: it proposes the likeliest successor of the token after `t`. */
const roughDraft: LogitsOf = (history, n, out) => out.set(LOGITS[(history[n - 1]! + 1) % V]!);

async function generateMany(speculative: "ngram" | "draft" | "none", n: number, len: number) {
  const backend = markovBackend();
  const sampled = backend.sampled({ maxDrafts: 3 });
  const engine = createEngine(speculative === "draft" ? new ProposingBackend(sampled, roughDraft) : sampled, {
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

for (const method of ["ngram", "draft"] as const) {
  Deno.test(`${method} speculative sampling through the engine keeps every position's exact marginal`, async () => {
    await checkMarginals(method);
  });
}

async function checkMarginals(method: "ngram" | "draft"): Promise<void> {
  const n = 3000;
  const len = 5;
  const { outs, metrics, backend } = await generateMany(method, n, len);
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
}

Deno.test("speculation keeps the cache protocol and per-request determinism", async () => {
  const a = await generateMany("ngram", 50, 12);
  const b = await generateMany("ngram", 50, 12);
  assert.deepEqual(a.outs, b.outs, "same seeds, same outputs");
  assert.ok(a.metrics.steps < 12 * 50);
});

const GREEDY: SamplingParams = { ...sampling(0, 24), temperature: 0 };

/** Greedy runs of 12 prompts sharing a 9-token prefix, 8 at a time, in a pool small enough to preempt. */
async function greedyRuns(draft: LogitsOf | undefined) {
  const V = 16;
  const history = new HistoryBackend({ vocabSize: V, numBlocks: 24, blockSize: 4, logitsOf: hashedLogits(V) });
  const sampled = history.sampled({ maxDrafts: 4, maxBatchTokens: 64, maxSeqs: 8 });
  const backend = draft === undefined ? sampled : new ProposingBackend(sampled, draft);
  const engine = createEngine(backend, {
    tokenizer: new ToyTokenizer(),
    maxNumSeqs: 8,
    maxQueue: 64,
    maxNumBatchedTokens: 32,
    speculative: draft === undefined ? "none" : "draft",
    numSpeculativeTokens: 4,
    eosTokenIds: [],
  });
  const prefix = [3, 1, 4, 1, 5, 9, 2, 6, 5];
  const outs = await Promise.all(Array.from({ length: 12 }, async (_, i) => {
    const stream = engine.generate({ id: `g${i}`, promptTokens: [...prefix, i % V, (i * 7) % V], sampling: GREEDY });
    const tokens: number[] = [];
    for await (const c of stream as ReadableStream<EngineChunk>) if (c.type === "step") tokens.push(...c.tokens);
    return tokens;
  }));
  const metrics = engine.metrics();
  const stats = engine.stats();
  await engine.close();
  assert.equal(history.live.size, 0, "every sequence released its cache");
  return { outs, metrics, stats, backend };
}

Deno.test("draft-model speculation: greedy output equals plain decoding under batching, prefix hits and preemption", async () => {
  const plain = await greedyRuns(undefined);
  assert.ok(plain.outs.every((o) => o.length === 24));
  assert.ok(plain.metrics.preemptions > 0, "the small pool preempted");
  assert.ok((plain.stats.prefixCacheHitTokens ?? 0) > 0, "prompts shared prefix blocks");

  // The target drafting for itself: its draft KV (the proposing backend's own pool, filled through the same block
  // tables by fed tokens only) must hold the exact history, or some proposal would be rejected.
  const self = await greedyRuns(hashedLogits(16));
  assert.deepEqual(self.outs, plain.outs);
  assert.ok(self.metrics.draftedTokens > 0);
  assert.equal(self.metrics.acceptedDrafts, self.metrics.draftedTokens, "every draft of the target itself accepted");
  assert.ok(self.metrics.steps < plain.metrics.steps, "fewer steps");

  // A draft model that is often wrong: same output, some drafts rejected.
  const base = hashedLogits(16);
  const skewed: LogitsOf = (h, n, out) => {
    base(h, n, out);
    out[(h[n - 1]! * 5 + 3) % 16] = out[(h[n - 1]! * 5 + 3) % 16]! + 2.5;
  };
  const other = await greedyRuns(skewed);
  assert.deepEqual(other.outs, plain.outs);
  assert.ok(other.metrics.acceptedDrafts > 0 && other.metrics.acceptedDrafts < other.metrics.draftedTokens);
  assert.ok((other.backend as ProposingBackend).proposed > 0);
});

Deno.test("speculative eagle3 needs a backend with an EAGLE-3 head", () => {
  assert.throws(
    () =>
      createEngine(markovBackend().sampled(), {
        tokenizer: new ToyTokenizer(),
        speculative: "eagle3",
        eosTokenIds: [],
      }),
    /speculative eagle3 needs a backend with an EAGLE-3 head/,
  );
});

Deno.test("speculative draft needs a backend with a draft model", () => {
  assert.throws(
    () =>
      createEngine(markovBackend().sampled(), {
        tokenizer: new ToyTokenizer(),
        speculative: "draft",
        eosTokenIds: [],
      }),
    /speculative draft needs a backend with a draft model/,
  );
});
