/**
 * The sampling fields' description and what derives from it: every field (whatever the table lists) travels from a
 * request through the builder and the sub-batch splitter to the host sampler's reader, and each field's limits are
 * the validator's.
 */
import assert from "node:assert/strict";
import { subBatch } from "../../engine/backends/sub_batch.ts";
import { checkStepBatch } from "../../engine/backends/check_step_batch.ts";
import {
  allocSampling,
  invalidField,
  neutralRow,
  penalised,
  readRow,
  rowFromRequest,
  SAMPLING_FIELDS,
  SAMPLING_KEYS,
  type SamplingRow,
} from "../../engine/sampling_fields.ts";
import type { BackendInfo } from "../../engine/step_batch.ts";
import { StepBatchBuilder } from "../../engine/step_batch_builder.ts";

const INFO: BackendInfo = {
  vocabSize: 16,
  maxPositions: 64,
  blockSize: 4,
  numBlocks: 32,
  maxBatchTokens: 16,
  maxSeqs: 4,
  maxDrafts: 2,
  maxTopLogprobs: 3,
  sharesPrefixBlocks: false,
};

/** A valid row whose every field differs from its neutral value (and from the other rows'), by index `k`. */
function distinctRow(k: number): SamplingRow {
  const out: Record<string, number | bigint> = {};
  for (const key of SAMPLING_KEYS) {
    const f = SAMPLING_FIELDS[key];
    if (f.type === "u64") out[key] = 1000n + BigInt(k);
    else if (key === "logprobs") out[key] = k % (INFO.maxTopLogprobs + 1);
    else if (key === "topP" || key === "minP") out[key] = Math.fround(0.25 + k / 16);
    else if (f.type === "i32") out[key] = 2 + k;
    else out[key] = Math.fround(1.5 + k / 4);
  }
  return out as SamplingRow;
}

Deno.test("sampling fields: every field goes builder → sub-batch → host reader unchanged", () => {
  const b = new StepBatchBuilder(INFO, 16);
  const rows = [0, 1, 2].map(distinctRow);
  rows.forEach((row, i) =>
    b.add({
      ...row,
      seqId: 10 + i,
      tokens: Int32Array.from([1, 2, 3]),
      from: 0,
      to: 3,
      drafts: [],
      sample: true,
      blocks: [4 * i],
      promptLength: 2,
    })
  );
  const batch = b.batch();
  checkStepBatch(batch, INFO);
  rows.forEach((row, i) => assert.deepEqual(readRow(batch.sampling, i), row));
  const sub = subBatch(batch, [2, 0], INFO.vocabSize);
  assert.deepEqual(readRow(sub.sampling, 0), rows[2]);
  assert.deepEqual(readRow(sub.sampling, 1), rows[0]);
});

Deno.test("sampling fields: a request's absent fields are neutral; the seed is the sequence's", () => {
  const row = rowFromRequest({ temperature: 0.5, topP: 0.9, topK: 4, logprobs: -1, presencePenalty: 0.5 }, 42n);
  assert.deepEqual(row, { ...neutralRow(), temperature: 0.5, topP: 0.9, topK: 4, presencePenalty: 0.5, seeds: 42n });
  assert.equal(penalised(row), true);
  assert.equal(penalised(neutralRow()), false);
  assert.deepEqual(readRow(allocSampling(2), 1), neutralRow());
});

Deno.test("sampling fields: each field's limit names it", () => {
  const cases: [keyof SamplingRow, number][] = [
    ["temperature", -1],
    ["temperature", Infinity],
    ["topP", 1.5],
    ["topK", -1],
    ["minP", -0.1],
    ["presencePenalty", NaN],
    ["frequencyPenalty", -Infinity],
    ["repetitionPenalty", 0],
    ["logprobs", INFO.maxTopLogprobs + 1],
    ["logprobs", -2],
  ];
  for (const [key, value] of cases) {
    const s = allocSampling(1);
    assert.equal(invalidField(s, 0, INFO), undefined);
    (s[key] as { [i: number]: number })[0] = value;
    assert.equal(invalidField(s, 0, INFO)?.[0], key, `${key} = ${value}`);
  }
});

Deno.test("sampling fields: packing keeps a tiny top-p a cut and caps logprobs at the backend's", () => {
  const b = new StepBatchBuilder(INFO, 16);
  b.add({
    ...neutralRow(),
    topP: Number.MIN_VALUE,
    logprobs: 20,
    seqId: 1,
    tokens: Int32Array.from([1]),
    from: 0,
    to: 1,
    drafts: [],
    sample: true,
    blocks: [0],
    promptLength: 1,
  });
  assert.ok(b.sampling.topP[0]! > 0);
  assert.equal(b.sampling.logprobs[0], INFO.maxTopLogprobs);
});
