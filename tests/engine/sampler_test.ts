import assert from "node:assert/strict";
import fc from "fast-check";
import type { SamplingParams } from "../../engine/engine.ts";
import { argmax, Prng, Sampler, tokenLogprob, topIds } from "../../engine/sampler.ts";

function params(p: Partial<SamplingParams>): SamplingParams {
  return { temperature: 1, topP: 1, topK: 0, maxTokens: 16, stopTokens: [], stopStrings: [], logprobs: -1, ...p };
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

Deno.test("Prng: same seed, same stream; different seeds differ; values in [0, 1)", () => {
  const a = new Prng(42);
  const b = new Prng(42);
  const c = new Prng(43);
  const xs = Array.from({ length: 100 }, () => a.next());
  assert.deepEqual(xs, Array.from({ length: 100 }, () => b.next()));
  assert.notDeepEqual(xs, Array.from({ length: 100 }, () => c.next()));
  for (const x of xs) assert.ok(x >= 0 && x < 1);
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  assert.ok(Math.abs(mean - 0.5) < 0.1);
});

Deno.test("argmax breaks ties towards the lowest id; greedy sampler ignores the seed", () => {
  assert.equal(argmax(Float32Array.from([1, 3, 3, 2])), 1);
  const s = new Sampler(params({ temperature: 0, seed: 7 }));
  assert.equal(s.greedy, true);
  assert.equal(s.sample(Float32Array.from([0, -1, 5, 5])), 2);
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

Deno.test("distribution applies temperature, top-k and top-p", () => {
  const logits = Float32Array.from([1, 2, 3, 4]);
  const t = new Sampler(params({ temperature: 0.5 })).distribution(logits);
  softmax([...logits], 0.5).forEach((p, i) => assert.ok(Math.abs(t[i]! - p) < 1e-9));
  const k = new Sampler(params({ topK: 2 })).distribution(logits);
  const p2 = softmax([3, 4]);
  assert.deepEqual([k[0], k[1]], [0, 0]);
  assert.ok(Math.abs(k[2]! - p2[0]!) < 1e-9 && Math.abs(k[3]! - p2[1]!) < 1e-9);
  // softmax([1,2,3,4]) ≈ [.032, .087, .237, .644]: top_p 0.8 keeps {3, 2}; 0.5 keeps {3} only.
  const n = new Sampler(params({ topP: 0.8 })).distribution(logits);
  assert.deepEqual([n[0], n[1]], [0, 0]);
  assert.ok(Math.abs(n[2]! + n[3]! - 1) < 1e-9);
  const one = new Sampler(params({ topP: 0.5 })).distribution(logits);
  assert.deepEqual([...one], [0, 0, 0, 1]);
});

Deno.test("seeded sampling matches the target distribution and is reproducible", () => {
  const logits = Float32Array.from([0.2, 1.5, -0.7, 1.1, 0.0]);
  const probs = softmax([...logits]);
  const n = 20000;
  const draw = (seed: number) => {
    const s = new Sampler(params({ seed }));
    return Array.from({ length: n }, () => s.sample(logits));
  };
  const a = draw(11);
  assert.deepEqual(a.slice(0, 200), draw(11).slice(0, 200));
  const counts = [0, 0, 0, 0, 0];
  for (const t of a) counts[t]!++;
  assert.ok(chiSquare(counts, probs, n) < CHI2_999[4]!);
});

Deno.test("rejection sampling of a draft keeps the target distribution (every draft choice, with top-k)", () => {
  const logits = Float32Array.from([0.2, 1.5, -0.7, 1.1, 0.0, 0.9]);
  const bonus = Float32Array.from([0, 0, 0, 0, 0, 0]);
  for (const [topK, df] of [[0, 5], [4, 3]] as const) {
    const target = new Sampler(params({ topK, temperature: 0.8, seed: 1 })).distribution(logits);
    const probs = [...target];
    for (let draft = 0; draft < 6; draft++) {
      const s = new Sampler(params({ topK, temperature: 0.8, seed: 100 + draft }));
      const n = 12000;
      const counts = [0, 0, 0, 0, 0, 0];
      let accepted = 0;
      for (let i = 0; i < n; i++) {
        const v = s.verify([logits, bonus], [draft]);
        counts[v.tokens[0]!]!++;
        if (v.acceptedDrafts === 1) {
          accepted++;
          assert.equal(v.tokens.length, 2, "an accepted last draft earns a bonus token");
        } else assert.equal(v.tokens.length, 1);
      }
      assert.ok(chiSquare(counts, probs, n) < CHI2_999[df]!, `draft ${draft}, topK ${topK}: ${counts}`);
      // Acceptance rate is p(draft) for a one-hot draft distribution; binomial sd <= 0.0046 here, so 0.02 is > 4 sd.
      assert.ok(Math.abs(accepted / n - probs[draft]!) < 0.02, `draft ${draft} accepted ${accepted / n}`);
    }
  }
});

Deno.test("greedy verify accepts exactly the drafts that match the argmax chain", () => {
  const s = new Sampler(params({ temperature: 0 }));
  const rows = [Float32Array.from([0, 5, 1]), Float32Array.from([3, 0, 1]), Float32Array.from([0, 0, 9])];
  assert.deepEqual(s.verify(rows, [1, 0]), { tokens: [1, 0, 2], acceptedDrafts: 2 });
  assert.deepEqual(s.verify(rows, [1, 2]), { tokens: [1, 0], acceptedDrafts: 1 });
  assert.deepEqual(s.verify(rows, [2, 0]), { tokens: [1], acceptedDrafts: 0 });
});
