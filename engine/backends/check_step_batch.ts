/**
 * Validation of a step batch and its result buffers against a backend's limits (docs/backend-step.md). Every
 * backend runs it before reading a batch, so a malformed batch is an Error naming the field, never an out-of-bounds
 * read or a corrupted cache.
 */
import { invalidField } from "../sampling_fields.ts";
import type { BackendInfo, StepBatch, StepResult } from "../step_batch.ts";
import { batchLengths } from "./step_batch_layout.ts";

function fail(field: string, message: string): never {
  throw new Error(`step batch: ${field}: ${message}`);
}

function isInt(n: number): boolean {
  return Number.isInteger(n);
}

function need(field: string, array: { readonly length: number }, n: number): void {
  if (array.length < n) fail(field, `has ${array.length} entries, needs ${n}`);
}

export function checkStepBatch(batch: StepBatch, info: BackendInfo): void {
  const B = batch.numSeqs;
  const T = batch.numTokens;
  if (!isInt(B) || B < 1 || B > info.maxSeqs) fail("numSeqs", `${B} is outside 1..${info.maxSeqs}`);
  if (!isInt(T) || T < B || T > info.maxBatchTokens) fail("numTokens", `${T} is outside ${B}..${info.maxBatchTokens}`);
  const stride = batch.blockTableStride;
  if (!isInt(stride) || stride < 1) fail("blockTableStride", `${stride} is not a positive integer`);
  for (const [name, array, n] of batchLengths(batch)) need(name, array, n);
  if (batch.proposeCounts !== undefined && !info.proposesDrafts) {
    // This path has no draft model: a request for proposals is a caller bug, not something to ignore silently.
    for (let i = 0; i < B; i++) {
      if (batch.proposeCounts[i] !== 0) fail("proposeCounts", `this backend has no draft model (sequence ${i})`);
    }
  }
  const s = batch.sampling;
  if (batch.queryStart[0] !== 0) fail("queryStart", "queryStart[0] must be 0");
  if (batch.queryStart[B] !== T) fail("queryStart", `queryStart[${B}] is ${batch.queryStart[B]}, numTokens is ${T}`);
  if (batch.historyStart[0] !== 0) fail("historyStart", "historyStart[0] must be 0");
  if (batch.biasStart[0] !== 0) fail("biasStart", "biasStart[0] must be 0");
  if (batch.biasValues.length < batch.biasIds.length) {
    fail("biasValues", `has ${batch.biasValues.length} entries, biasIds has ${batch.biasIds.length}`);
  }
  const words = Math.ceil(info.vocabSize / 32);
  const maskRows = Math.floor(batch.allowedMask.length / words);
  const seen = new Set<number>();
  for (let i = 0; i < B; i++) {
    const id = batch.seqIds[i]!;
    if (seen.has(id)) fail("seqIds", `sequence ${id} appears twice`);
    seen.add(id);
    const q0 = batch.queryStart[i]!;
    const q1 = batch.queryStart[i + 1]!;
    if (!(q1 > q0)) fail("queryStart", `sequence ${i} feeds no tokens (queryStart not increasing)`);
    const fed = q1 - q0;
    const ctx = batch.contextLens[i]!;
    if (ctx < fed || ctx > info.maxPositions) {
      fail("contextLens", `sequence ${i}: ${ctx} is outside ${fed}..${info.maxPositions}`);
    }
    for (let t = q0; t < q1; t++) {
      const tok = batch.tokens[t]!;
      if (tok < 0 || tok >= info.vocabSize) fail("tokens", `token ${tok} is outside the vocabulary`);
      if (batch.positions[t] !== ctx - (q1 - t)) {
        fail("positions", `sequence ${i}: position ${batch.positions[t]} where ${ctx - (q1 - t)} was expected`);
      }
    }
    const flag = batch.sampleFlags[i]!;
    if (flag !== 0 && flag !== 1) fail("sampleFlags", `sequence ${i}: ${flag} is neither 0 nor 1`);
    const d = batch.draftCounts[i]!;
    if (d < 0 || d > info.maxDrafts || d >= fed || (flag === 0 && d > 0)) {
      fail("draftCounts", `sequence ${i}: ${d} drafts (feeds ${fed}, at most ${info.maxDrafts})`);
    }
    const blocks = Math.ceil(ctx / info.blockSize);
    if (blocks > stride) fail("blockTableStride", `${stride} entries cannot hold ${blocks} blocks`);
    for (let j = 0; j < blocks; j++) {
      const b = batch.blockTables[i * stride + j]!;
      if (b < 0 || b >= info.numBlocks) {
        fail("blockTables", `sequence ${i}: block ${b} is outside 0..${info.numBlocks - 1}`);
      }
    }
    const bad = invalidField(s, i, info);
    if (bad !== undefined) fail(`sampling.${bad[0]}`, bad[1]);
    const m = batch.maskRowStart[i]!;
    if (m !== -1 && (m < 0 || m + d + 1 > maskRows)) {
      fail("maskRowStart", `sequence ${i}: rows ${m}..${m + d} are outside the ${maskRows} rows of allowedMask`);
    }
    const h0 = batch.historyStart[i]!;
    const h1 = batch.historyStart[i + 1]!;
    if (h1 < h0 || h1 > batch.history.length) {
      fail("historyStart", `sequence ${i}: ${h0}..${h1} is not a range of history`);
    }
    const pl = batch.historyPromptLens[i]!;
    if (pl < 0 || pl > h1 - h0) fail("historyPromptLens", `sequence ${i}: ${pl} is outside 0..${h1 - h0}`);
    for (let h = h0; h < h1; h++) {
      const tok = batch.history[h]!;
      if (tok < 0 || tok >= info.vocabSize) fail("history", `token ${tok} is outside the vocabulary`);
    }
    const b0 = batch.biasStart[i]!;
    const b1 = batch.biasStart[i + 1]!;
    if (b1 < b0 || b1 > batch.biasIds.length) {
      fail("biasStart", `sequence ${i}: ${b0}..${b1} is not a range of biasIds`);
    }
    for (let b = b0; b < b1; b++) {
      const tok = batch.biasIds[b]!;
      if (tok < 0 || tok >= info.vocabSize) fail("biasIds", `token ${tok} is outside the vocabulary`);
      if (!Number.isFinite(batch.biasValues[b]!)) fail("biasValues", `${batch.biasValues[b]} is not finite`);
    }
  }
}

export function checkStepResult(result: StepResult, info: BackendInfo, numSeqs: number): void {
  const width = info.maxDrafts + 1;
  const top = info.maxTopLogprobs;
  const n = (field: string, arr: { readonly length: number }, want: number) => {
    if (arr.length < want) throw new Error(`step result: ${field}: has ${arr.length} entries, needs ${want}`);
  };
  n("counts", result.counts, numSeqs);
  n("tokens", result.tokens, numSeqs * width);
  n("logprobs", result.logprobs, numSeqs * width);
  n("topIds", result.topIds, numSeqs * width * top);
  n("topLogprobs", result.topLogprobs, numSeqs * width * top);
}
