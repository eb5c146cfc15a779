/**
 * Builds a compact StepBatch from per-sequence entries, for tests that drive a LogitsBackend directly: each entry
 * feeds `tokens` after `cachedLength` kept tokens and asks for the logits of its last `logitsCount` fed positions
 * (0 for an intermediate prefill chunk). Block tables list consecutive ids from `firstBlock` per sequence.
 */
import type { StepBatch } from "../engine/step_batch.ts";
import { neutralStepFields } from "./neutral_step_fields.ts";

export interface PackEntry {
  readonly seqId: number;
  readonly tokens: readonly number[];
  readonly cachedLength: number;
  readonly logitsCount: number;
}

export function packBatch(entries: readonly PackEntry[], blockSize = 16): StepBatch {
  const B = entries.length;
  const T = entries.reduce((n, e) => n + e.tokens.length, 0);
  const stride = Math.max(1, ...entries.map((e) => Math.ceil((e.cachedLength + e.tokens.length) / blockSize)));
  const batch = {
    numSeqs: B,
    numTokens: T,
    seqIds: new Int32Array(B),
    tokens: new Int32Array(T),
    positions: new Int32Array(T),
    queryStart: new Int32Array(B + 1),
    contextLens: new Int32Array(B),
    blockTables: new Int32Array(B * stride).fill(-1),
    blockTableStride: stride,
    ...neutralStepFields(B),
  };
  let t = 0;
  entries.forEach((e, i) => {
    batch.seqIds[i] = e.seqId;
    batch.queryStart[i] = t;
    e.tokens.forEach((tok, j) => {
      batch.tokens[t + j] = tok;
      batch.positions[t + j] = e.cachedLength + j;
    });
    t += e.tokens.length;
    batch.queryStart[i + 1] = t;
    const ctx = e.cachedLength + e.tokens.length;
    batch.contextLens[i] = ctx;
    batch.sampleFlags[i] = e.logitsCount > 0 ? 1 : 0;
    batch.draftCounts[i] = Math.max(0, e.logitsCount - 1);
    for (let j = 0; j < Math.ceil(ctx / blockSize); j++) batch.blockTables[i * stride + j] = i * stride + j;
  });
  return batch;
}

/** Splits a forward's output into each entry's rows (`logitsCount × vocabSize` floats; empty for 0), copied. */
export function rowsOf(out: Float32Array, entries: readonly PackEntry[], vocabSize: number): Float32Array[] {
  let r = 0;
  return entries.map((e) => {
    const rows = out.slice(r * vocabSize, (r + e.logitsCount) * vocabSize);
    r += e.logitsCount;
    return rows;
  });
}
