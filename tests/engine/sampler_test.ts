import assert from "node:assert/strict";
import fc from "fast-check";
import { philoxUniform } from "../../engine/philox.ts";
import {
  argmax,
  inverseCdf,
  penaltyHistory,
  type RowSampling,
  Sampler,
  tokenLogprob,
  topIds,
} from "../../engine/sampler.ts";
import { neutralRow } from "../../engine/sampling_fields.ts";

/** Every field neutral (engine/sampling_fields.ts) but temperature 1 and seed 0, then `p`. */
function params(p: Partial<RowSampling>): RowSampling {
  const { seeds: _seeds, logprobs: _logprobs, ...neutral } = neutralRow();
  return { ...neutral, temperature: 1, seed: 0n, ...p };
}

/** The kept distribution for raw logits (no penalties, no mask). */
function dist(logits: Float32Array, p: Partial<RowSampling>): Float64Array {
  const s = new Sampler();
  const rp = params(p);
  return s.distribution(s.adjusted(logits, rp), rp).slice();
}

function softmax(logits: readonly number[], temperature = 1): number[] {
  const max = Math.max(...logits);
  const e = logits.map((l) => Math.exp((l - max) / temperature));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / z);
}

/** Pearson chi-square statistic of observed counts against expected probabilities (cells with p = 0 must be 0). */
function chiSquare(counts: readonly number[], probs: readonly number[], n: number): number {
  let chi = 0;
  probs.forEach((p, i) => {
    if (p === 0) {
      assert.equal(counts[i], 0, `token ${i} has probability 0 but was drawn`);
      return;
    }
    chi += (counts[i]! - n * p) ** 2 / (n * p);
  });
  return chi;
}

// Upper 0.1% points of chi-square: a correct sampler fails such a test with probability 0.001 for a random seed,
// and the seeds are fixed, so the outcome is deterministic; a biased sampler (e.g. forgetting to remove the
// rejected draft from the residual) overshoots these by orders of magnitude at these sample sizes.
const CHI2_999: Record<number, number> = { 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52 };

Deno.test("argmax breaks ties towards the lowest id; greedy sampling ignores the seed and the position", () => {
  assert.equal(argmax(Float32Array.from([1, 3, 3, 2])), 1);
  const s = new Sampler();
  const row = Float32Array.from([0, -1, 5, 5]);
  for (const seed of [7n, 8n]) {
    for (const pos of [0, 99]) assert.equal(s.sample(row, params({ temperature: 0, seed }), pos), 2);
  }
});

Deno.test("topIds returns the k largest, descending, ties by id", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: -5, max: 5 }), { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 8 }),
      (vals, k) => {
        const arr = Float32Array.from(vals);
        const expected = [...vals.keys()].sort((a, b) => vals[b]! - vals[a]! || a - b).slice(0, k);
        assert.deepEqual(topIds(arr, k), expected);
      },
    ),
  );
});

Deno.test("tokenLogprob is the temperature-1 log-softmax of the raw logits", () => {
  const logits = [2, 0.5, -1, 3, 3];
  const lp = tokenLogprob(Float32Array.from(logits), 1, 3);
  const p = softmax(logits);
  assert.ok(Math.abs(lp.logprob - Math.log(p[1]!)) < 1e-6);
  assert.deepEqual(lp.top.map((t) => t.id), [3, 4, 0]);
  assert.ok(Math.abs(lp.top[0]!.logprob - Math.log(p[3]!)) < 1e-6);
  assert.deepEqual(tokenLogprob(Float32Array.from(logits), 0, 0).top, []);
});

Deno.test("distribution applies temperature, top-k, top-p and min-p", () => {
  const logits = Float32Array.from([1, 2, 3, 4]);
  const t = dist(logits, { temperature: 0.5 });
  softmax([...logits], 0.5).forEach((p, i) => assert.ok(Math.abs(t[i]! - p) < 1e-9));
  const k = dist(logits, { topK: 2 });
  const p2 = softmax([3, 4]);
  assert.deepEqual([k[0], k[1]], [0, 0]);
  assert.ok(Math.abs(k[2]! - p2[0]!) < 1e-9 && Math.abs(k[3]! - p2[1]!) < 1e-9);
  // softmax([1,2,3,4]) ≈ [.032, .087, .237, .644]: top_p 0.8 keeps {3, 2}; 0.5 keeps {3} only.
  const n = dist(logits, { topP: 0.8 });
  assert.deepEqual([n[0], n[1]], [0, 0]);
  assert.ok(Math.abs(n[2]! + n[3]! - 1) < 1e-9);
  assert.deepEqual([...dist(logits, { topP: 0.5 })], [0, 0, 0, 1]);
  // min-p 0.2 drops tokens below 0.2 × 0.644 ≈ 0.129: keeps {2, 3}; 0.05 keeps {1, 2, 3}.
  const m = dist(logits, { minP: 0.2 });
  assert.deepEqual([m[0], m[1]], [0, 0]);
  assert.ok(Math.abs(m[2]! - p2[0]!) < 1e-9);
  const m2 = dist(logits, { minP: 0.05 });
  assert.equal(m2[0], 0);
  assert.ok(m2[1]! > 0);
});

Deno.test("top-k ties keep the lower id; top-p ties at the cut keep the lower id", () => {
  const tie = Float32Array.from([1, 2, 2, 2]);
  assert.deepEqual([...dist(tie, { topK: 2 })].map((p) => p > 0), [false, true, true, false]);
  // Three equal tokens of 1/3 each (plus a small one): top-p 0.5 keeps the two lowest-id ones.
  const three = Float32Array.from([5, 5, 5, -20]);
  assert.deepEqual([...dist(three, { topP: 0.5 })].map((p) => p > 0), [true, true, false, false]);
});

Deno.test("inverse CDF walks ids in ascending order: the first id whose running sum exceeds u · total", () => {
  const p = Float64Array.from([0.1, 0, 0.5, 0.4]);
  assert.equal(inverseCdf(p, 0), 0);
  assert.equal(inverseCdf(p, 0.0999), 0);
  assert.equal(inverseCdf(p, 0.1), 2);
  assert.equal(inverseCdf(p, 0.5999), 2);
  assert.equal(inverseCdf(p, 0.6), 3);
  assert.equal(inverseCdf(p, 0.99999), 3);
  // Unnormalised weights: u scales by their total.
  assert.equal(inverseCdf(Float64Array.from([1, 3]), 0.3), 1);
});

Deno.test("a sampled token is the inverse CDF at uniform(seed, position, 0): pure in (row, params, position)", () => {
  const logits = Float32Array.from([0.2, 1.5, -0.7, 1.1, 0.0]);
  const s = new Sampler();
  const rp = params({ seed: 1234n, temperature: 0.7 });
  const probs = s.distribution(s.adjusted(logits, rp), rp).slice();
  for (let pos = 0; pos < 50; pos++) {
    assert.equal(s.sample(logits, rp, pos), inverseCdf(probs, philoxUniform(1234n, pos, 0)));
  }
});

Deno.test("seeded sampling matches the target distribution over positions", () => {
  const logits = Float32Array.from([0.2, 1.5, -0.7, 1.1, 0.0]);
  const probs = softmax([...logits]);
  const n = 20000;
  const s = new Sampler();
  const counts = [0, 0, 0, 0, 0];
  for (let pos = 0; pos < n; pos++) counts[s.sample(logits, params({ seed: 11n }), pos)]!++;
  assert.ok(chiSquare(counts, probs, n) < CHI2_999[4]!);
});

Deno.test("penalties: frequency and presence over generated tokens, repetition over all; logprobs stay raw", () => {
  const row = Float32Array.from([2, 1, -1, 0.5]);
  // Prompt [3], generated [1, 1, 2].
  const h = penaltyHistory(Int32Array.from([3, 1, 1, 2]), 1);
  assert.deepEqual([...h.generated].sort(), [[1, 2], [2, 1]]);
  assert.deepEqual([...h.seen].sort(), [1, 2, 3]);
  const s = new Sampler();
  const adj = s.adjusted(row, params({ frequencyPenalty: 0.5, presencePenalty: 0.25 }), h);
  assert.deepEqual([...adj], [2, 1 - 0.5 * 2 - 0.25, -1 - 0.5 - 0.25, 0.5]);
  const rep = s.adjusted(row, params({ repetitionPenalty: 2 }), h);
  assert.deepEqual([...rep], [2, 0.5, -2, 0.25]);
  // Greedy with a frequency penalty moves off token 0 once it dominates the history.
  const many = penaltyHistory(Int32Array.from([0, 0, 0]), 0);
  assert.equal(s.sample(row, params({ temperature: 0, frequencyPenalty: 1 }), 3, many), 1);
  assert.equal(tokenLogprob(row, 0, 0).logprob, tokenLogprob(row, 0, 0).logprob);
});

Deno.test("mask: disallowed tokens get -inf; a row allowing nothing is an error", () => {
  const row = Float32Array.from([5, 1, 3, 4]);
  const s = new Sampler();
  const mask = Uint32Array.of(0b0110); // tokens 1 and 2
  assert.equal(s.sample(row, params({ temperature: 0 }), 0, undefined, mask), 2);
  for (let pos = 0; pos < 50; pos++) {
    assert.ok([1, 2].includes(s.sample(row, params({ seed: 5n }), pos, undefined, mask)));
  }
  assert.throws(() => s.sample(row, params({ temperature: 0 }), 0, undefined, Uint32Array.of(0)), /allowedMask/);
});
