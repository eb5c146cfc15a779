/**
 * The host sampler's rule at the Backend seam (docs/backend-step.md): verification by sample-and-compare with the
 * penalties seeing the drafts accepted before each row, mask rows per sampled position, logprobs of the raw logits,
 * and the same tokens whatever the batch.
 */
import assert from "node:assert/strict";
import { neutralRow } from "../../engine/sampling_fields.ts";
import { StepBatchBuilder, type StepEntry } from "../../engine/step_batch_builder.ts";
import { HistoryBackend } from "../../testing/history_backend.ts";

const V = 8;
/** The same logits after any history: token 3 leads clearly, then 5, then 1. */
const FIXED = [0, 1, 0, 4, 0, 3, 0, 0];

function entry(p: Partial<StepEntry> & { tokens: Int32Array; to: number }): StepEntry {
  return {
    seqId: 1,
    from: 0,
    drafts: [],
    sample: true,
    blocks: [0, 1, 2, 3],
    ...neutralRow(),
    seeds: 1n,
    promptLength: 2,
    ...p,
  };
}

function setup() {
  const inner = new HistoryBackend({
    vocabSize: V,
    numBlocks: 64,
    blockSize: 4,
    logitsOf: (_h, _n, o) => o.set(FIXED),
  });
  const backend = inner.sampled({ maxSeqs: 4, maxDrafts: 4, maxTopLogprobs: 3 });
  const b = new StepBatchBuilder(backend.info, 64);
  const step = async (entries: StepEntry[]) => {
    b.reset();
    for (const e of entries) b.add(e);
    await backend.step(b.batch(), b.result);
    const W = backend.info.maxDrafts + 1;
    return entries.map((_, i) => Array.from(b.result.tokens.subarray(i * W, i * W + b.result.counts[i]!)));
  };
  return { backend, builder: b, step };
}

Deno.test("penalties see the drafts accepted before each row, exactly as token-by-token decoding would", async () => {
  const { step } = setup();
  // Greedy with a frequency penalty of 1.5 over the generated tokens, decoded one token per step first:
  // 3 (4) · 5 (3 > 2.5) · 3 (2.5 > 1.5) · 5 (1.5 > 1) · 1 (1 = 1, lower id) · 3 (1 > 0).
  const prompt = [0, 0];
  const known = [...prompt];
  const plain: number[] = [];
  for (let s = 0; s < 6; s++) {
    const tokens = Int32Array.from(known);
    const [out] = await step([
      entry({ tokens, from: s === 0 ? 0 : known.length - 1, to: known.length, frequencyPenalty: 1.5, seqId: 7 }),
    ]);
    known.push(out![0]!);
    plain.push(out![0]!);
  }
  assert.deepEqual(plain, [3, 5, 3, 5, 1, 3]);
  // Now the same with drafts: prefill, then one verify of the next 4 plain tokens (all accepted + bonus).
  const known2 = [...prompt];
  let [out] = await step([entry({ tokens: Int32Array.from(known2), to: 2, frequencyPenalty: 1.5, seqId: 8 })]);
  known2.push(out![0]!);
  [out] = await step([
    entry({
      tokens: Int32Array.from(known2),
      from: 2,
      to: 3,
      drafts: plain.slice(1, 5),
      frequencyPenalty: 1.5,
      seqId: 8,
    }),
  ]);
  assert.deepEqual(out, plain.slice(1, 6));
  // A wrong second draft ends the row at the target's own token.
  [out] = await step([
    entry({ tokens: Int32Array.from([0, 0, 3]), from: 2, to: 3, drafts: [5, 5, 1], frequencyPenalty: 1.5, seqId: 9 }),
  ]);
  assert.deepEqual(out, [5, 3]);
});

Deno.test("mask rows apply per sampled position; logprobs stay the raw temperature-1 ones", async () => {
  const { backend, builder, step } = setup();
  const tokens = Int32Array.from([0, 0, 3]);
  builder.reset();
  builder.add(entry({ tokens, from: 0, to: 3, drafts: [1], logprobs: 2, frequencyPenalty: 2 }));
  const batch = builder.batch();
  // Two sampled rows (after the last fed token and after the draft): row 0 allows {1, 6}, row 1 allows {2}.
  const words = Math.ceil(V / 32);
  const mask = new Uint32Array(2 * words);
  mask[0] = (1 << 1) | (1 << 6);
  mask[words] = 1 << 2;
  const masked = { ...batch, allowedMask: mask, maskRowStart: Int32Array.from([0]) };
  await backend.step(masked, builder.result);
  const r = builder.result;
  assert.deepEqual(Array.from(r.tokens.subarray(0, r.counts[0]!)), [1, 2]);
  const logZ = Math.log(FIXED.reduce((s, x) => s + Math.exp(x), 0));
  assert.ok(Math.abs(r.logprobs[0]! - (FIXED[1]! - logZ)) < 1e-6, "raw logprob of the masked choice");
  assert.deepEqual(Array.from(r.topIds.subarray(0, 2)), [3, 5], "alternatives from the raw logits");
  // Without a mask the rows go back to the greedy choice.
  const [plain] = await step([entry({ tokens, from: 0, to: 3 })]);
  assert.deepEqual(plain, [3]);
});

Deno.test("the step batch builder reuses its buffers and clears stale block table rows", () => {
  const { builder } = setup();
  builder.add(entry({ tokens: Int32Array.from([1, 2, 3, 4, 5, 6]), to: 6, blocks: [4, 5] }));
  const first = builder.batch();
  assert.deepEqual(Array.from(first.blockTables.subarray(0, 3)), [4, 5, -1]);
  builder.reset();
  builder.add(entry({ tokens: Int32Array.from([1, 2]), to: 2, blocks: [9] }));
  const second = builder.batch();
  assert.equal(second.tokens, first.tokens, "same buffers");
  assert.equal(second.blockTables, first.blockTables);
  assert.deepEqual(Array.from(second.blockTables.subarray(0, 3)), [9, -1, -1]);
  assert.deepEqual([second.numSeqs, second.numTokens, second.queryStart[1], second.contextLens[0]], [1, 2, 2, 2]);
  assert.throws(() => {
    for (let i = 0; i < 10; i++) builder.add(entry({ seqId: 10 + i, tokens: Int32Array.from([1]), to: 1 }));
  }, /full/);
});

Deno.test("logit bias: per sequence, after the penalties, rows of drafts included; bad entries are rejected", async () => {
  const { step, builder, backend } = setup();
  const tokens = Int32Array.from([2, 2]);
  // Unbiased greedy takes 3; -100 on 3 gives 5 (logit 3); +2.5 on 1 beside it lifts 1 to 3.5, above 5.
  const [plain, no3, lift1] = await step([
    entry({ seqId: 1, tokens, to: 2 }),
    entry({ seqId: 2, tokens, to: 2, logitBias: new Map([[3, -100]]) }),
    entry({ seqId: 3, tokens, to: 2, logitBias: new Map([[3, -100], [1, 2.5]]) }),
  ]);
  assert.deepEqual([plain, no3, lift1], [[3], [5], [1]]);
  assert.deepEqual(Array.from(builder.biasStart.subarray(0, 4)), [0, 0, 1, 3]);
  // The bias adds to the penalised logit: a frequency penalty of 1.5 on 3 (generated once) leaves 2.5 < 3 (token 5),
  // a bias of +1 on 3 lifts it back to 3.5.
  const generated = Int32Array.from([2, 2, 3]);
  const [penalised, rescued] = await step([
    entry({ seqId: 4, tokens: generated, to: 3, frequencyPenalty: 1.5 }),
    entry({ seqId: 5, tokens: generated, to: 3, frequencyPenalty: 1.5, logitBias: new Map([[3, 1]]) }),
  ]);
  assert.deepEqual([penalised, rescued], [[5], [3]]);
  // Every draft row sees the bias: drafts [5, 5] verified under -100 on 3 are accepted, then 5 again.
  const [drafted] = await step([entry({ seqId: 6, tokens, to: 2, drafts: [5, 5], logitBias: new Map([[3, -100]]) })]);
  assert.deepEqual(drafted, [5, 5, 5]);
  // A malformed bias is an error naming the field, never an out-of-bounds read.
  builder.reset();
  builder.add(entry({ seqId: 7, tokens, to: 2, logitBias: new Map([[V, 1]]) }));
  await assert.rejects(backend.step(builder.batch(), builder.result), /biasIds/);
  builder.reset();
  builder.add(entry({ seqId: 8, tokens, to: 2, logitBias: new Map([[1, NaN]]) }));
  await assert.rejects(backend.step(builder.batch(), builder.result), /biasValues/);
});
