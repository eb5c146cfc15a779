/**
 * Draft-model and EAGLE-3 speculation keep the target's sampling distribution on the native library: a random 96-token
 * checkpoint drafting for itself, or the committed random EAGLE-3 head (tests/fixtures/eagle3/head-a) drafting for
 * it, at temperature 1, through the engine, three tokens per request. The second
 * generated token is the one drafts decide (the prefill samples the first and proposes the draft the next step
 * verifies against the second; a third token would be past the request's end, so none is proposed for it), so its
 * empirical distribution over 3000 seeds is compared by chi-square with the exact marginal
 * Σ_x p(x | prompt) · p(· | prompt, x), computed from the library's own logits.
 */
import assert from "node:assert/strict";
import type { EngineChunk } from "../../engine/engine.ts";
import { createEngine } from "../../engine/llm_engine.ts";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { prefillBatch } from "./step_batches.ts";

const DIR = new URL("../fixtures/checkpoints/llama3-fp32", import.meta.url).pathname;
const HEAD = new URL("../fixtures/eagle3/head-a", import.meta.url).pathname;
const PROMPT = [5, 17, 42, 8, 91, 23, 60];

function softmax(row: Float32Array): Float64Array {
  let m = -Infinity;
  for (const x of row) m = Math.max(m, x);
  const e = Float64Array.from(row, (x) => Math.exp(x - m));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

/** The exact distribution of the second sampled token at temperature 1. */
async function exactSecond(): Promise<Float64Array> {
  const backend = await NativeBackend.create(DIR, { threads: 2, maxSeqs: 128, maxBatchTokens: 1024, numBlocks: 256 });
  try {
    const V = backend.info.vocabSize;
    const first = await backend.forwardLogits(prefillBatch(backend.info, [{ seqId: 1, tokens: PROMPT }]));
    const p0 = softmax(first.subarray((PROMPT.length - 1) * V, PROMPT.length * V));
    const seqs = Array.from({ length: V }, (_, x) => ({ seqId: 10 + x, tokens: [...PROMPT, x] }));
    const logits = await backend.forwardLogits(prefillBatch(backend.info, seqs));
    const p1 = new Float64Array(V);
    const n = PROMPT.length + 1;
    for (let x = 0; x < V; x++) {
      const row = softmax(logits.subarray((x * n + n - 1) * V, (x * n + n) * V));
      for (let v = 0; v < V; v++) p1[v] = p1[v]! + p0[x]! * row[v]!;
    }
    return p1;
  } finally {
    await backend.close();
  }
}

for (const method of ["draft", "eagle3"] as const) {
  Deno.test(`native ${method} speculation keeps the sampled distribution (chi-square, 96 tokens)`, async () => {
    await checkSecond(method, method === "draft" ? DIR : HEAD);
  });
}

async function checkSecond(method: "draft" | "eagle3", draftModelDir: string): Promise<void> {
  const expected = await exactSecond();
  const backend = await NativeBackend.create(DIR, {
    threads: 2,
    maxSeqs: 64,
    maxBatchTokens: 512,
    numBlocks: 96,
    maxDrafts: 2,
    draftModelDir,
  });
  const engine = createEngine(backend, {
    tokenizer: new ToyTokenizer(),
    maxNumSeqs: 64,
    maxQueue: 4000,
    speculative: method,
    numSpeculativeTokens: 2,
    eosTokenIds: [],
  });
  const n = 3000;
  const seconds = await Promise.all(Array.from({ length: n }, async (_, i) => {
    const stream = engine.generate({
      id: `d${i}`,
      promptTokens: PROMPT,
      sampling: {
        temperature: 1,
        topP: 1,
        topK: 0,
        seed: 1 + i,
        maxTokens: 3,
        stopTokens: [],
        stopStrings: [],
        logprobs: -1,
      },
    });
    const tokens: number[] = [];
    for await (const c of stream as ReadableStream<EngineChunk>) if (c.type === "step") tokens.push(...c.tokens);
    assert.equal(tokens.length, 3);
    return tokens[1]!;
  }));
  const m = engine.metrics();
  await engine.close();
  assert.ok(m.draftedTokens >= n, `every second token was drafted (${m.draftedTokens})`);
  assert.ok(m.acceptedDrafts > 0 && m.acceptedDrafts < m.draftedTokens, `some drafts accepted (${m.acceptedDrafts})`);

  const counts = new Float64Array(expected.length);
  for (const t of seconds) counts[t] = counts[t]! + 1;
  // Tokens expected fewer than 5 times are pooled into one bin, as chi-square needs.
  let chi = 0;
  let bins = 0;
  let restObserved = 0;
  let restExpected = 0;
  expected.forEach((p, v) => {
    const e = n * p;
    if (e >= 5) {
      chi += (counts[v]! - e) ** 2 / e;
      bins++;
    } else {
      restObserved += counts[v]!;
      restExpected += e;
    }
  });
  if (restExpected > 0) {
    chi += (restObserved - restExpected) ** 2 / restExpected;
    bins++;
  }
  // 0.1% critical value (Wilson–Hilferty); the seeds are fixed, so this never flakes.
  const df = bins - 1;
  const critical = df * (1 - 2 / (9 * df) + 3.09 * Math.sqrt(2 / (9 * df))) ** 3;
  assert.ok(df >= 5, `enough bins (${bins})`);
  assert.ok(chi < critical, `chi2 ${chi.toFixed(1)} over ${df} degrees of freedom (critical ${critical.toFixed(1)})`);
}
