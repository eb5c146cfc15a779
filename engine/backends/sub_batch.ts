/**
 * A compact step batch holding a subset of another batch's sequences, in the given order: what a sharded backend
 * hands each shard, and what crosses to a worker (only the live entries, not the engine's full-size buffers).
 */
import { allocSampling, copyRow } from "../sampling_fields.ts";
import type { StepBatch } from "../step_batch.ts";

export function subBatch(batch: StepBatch, indices: readonly number[], vocabSize: number): StepBatch {
  const B = indices.length;
  const stride = batch.blockTableStride;
  const words = Math.ceil(vocabSize / 32);
  let T = 0;
  let H = 0;
  let K = 0;
  let maskRows = 0;
  for (const i of indices) {
    T += batch.queryStart[i + 1]! - batch.queryStart[i]!;
    H += batch.historyStart[i + 1]! - batch.historyStart[i]!;
    K += batch.biasStart[i + 1]! - batch.biasStart[i]!;
    if (batch.maskRowStart[i]! >= 0) maskRows += batch.draftCounts[i]! + 1;
  }
  const s = batch.sampling;
  const out = {
    numSeqs: B,
    numTokens: T,
    seqIds: new Int32Array(B),
    tokens: new Int32Array(T),
    positions: new Int32Array(T),
    queryStart: new Int32Array(B + 1),
    contextLens: new Int32Array(B),
    draftCounts: new Int32Array(B),
    sampleFlags: new Uint8Array(B),
    blockTables: new Int32Array(B * stride),
    blockTableStride: stride,
    sampling: allocSampling(B),
    maskRowStart: new Int32Array(B),
    allowedMask: new Uint32Array(maskRows * words),
    historyStart: new Int32Array(B + 1),
    history: new Int32Array(H),
    historyPromptLens: new Int32Array(B),
    biasStart: new Int32Array(B + 1),
    biasIds: new Int32Array(K),
    biasValues: new Float32Array(K),
  };
  let k = 0;
  let t = 0;
  let h = 0;
  let m = 0;
  indices.forEach((i, j) => {
    const q0 = batch.queryStart[i]!;
    const q1 = batch.queryStart[i + 1]!;
    out.seqIds[j] = batch.seqIds[i]!;
    out.queryStart[j] = t;
    out.tokens.set(batch.tokens.subarray(q0, q1), t);
    out.positions.set(batch.positions.subarray(q0, q1), t);
    t += q1 - q0;
    out.queryStart[j + 1] = t;
    out.contextLens[j] = batch.contextLens[i]!;
    out.draftCounts[j] = batch.draftCounts[i]!;
    out.sampleFlags[j] = batch.sampleFlags[i]!;
    out.blockTables.set(batch.blockTables.subarray(i * stride, (i + 1) * stride), j * stride);
    copyRow(out.sampling, j, s, i);
    const ms = batch.maskRowStart[i]!;
    if (ms >= 0) {
      const rows = batch.draftCounts[i]! + 1;
      out.allowedMask.set(batch.allowedMask.subarray(ms * words, (ms + rows) * words), m * words);
      out.maskRowStart[j] = m;
      m += rows;
    } else out.maskRowStart[j] = -1;
    const h0 = batch.historyStart[i]!;
    const h1 = batch.historyStart[i + 1]!;
    out.historyStart[j] = h;
    out.history.set(batch.history.subarray(h0, h1), h);
    h += h1 - h0;
    out.historyStart[j + 1] = h;
    out.historyPromptLens[j] = batch.historyPromptLens[i]!;
    const b0 = batch.biasStart[i]!;
    const b1 = batch.biasStart[i + 1]!;
    out.biasStart[j] = k;
    out.biasIds.set(batch.biasIds.subarray(b0, b1), k);
    out.biasValues.set(batch.biasValues.subarray(b0, b1), k);
    k += b1 - b0;
    out.biasStart[j + 1] = k;
  });
  return out;
}
