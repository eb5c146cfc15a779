/**
 * Step batches for the native backend tests: whole-prompt prefills (each sequence feeds all its tokens from position
 * 0, its blocks allocated consecutively from `firstBlock`), greedy unless changed, sized exactly.
 */
import type { BackendInfo, StepBatch, StepResult } from "../../engine/step_batch.ts";
import { neutralStepFields } from "../../testing/neutral_step_fields.ts";

export interface PrefillSeq {
  readonly seqId: number;
  readonly tokens: readonly number[];
}

export function prefillBatch(info: BackendInfo, seqs: readonly PrefillSeq[], firstBlock = 0): StepBatch {
  const B = seqs.length;
  const T = seqs.reduce((n, s) => n + s.tokens.length, 0);
  const stride = Math.max(1, ...seqs.map((s) => Math.ceil(s.tokens.length / info.blockSize)));
  const tokens = new Int32Array(T);
  const positions = new Int32Array(T);
  const queryStart = new Int32Array(B + 1);
  const contextLens = new Int32Array(B);
  const blockTables = new Int32Array(B * stride).fill(-1);
  let t = 0;
  let block = firstBlock;
  seqs.forEach((s, i) => {
    queryStart[i] = t;
    s.tokens.forEach((tok, j) => {
      tokens[t] = tok;
      positions[t++] = j;
    });
    contextLens[i] = s.tokens.length;
    for (let j = 0; j < Math.ceil(s.tokens.length / info.blockSize); j++) blockTables[i * stride + j] = block++;
  });
  queryStart[B] = T;
  return {
    numSeqs: B,
    numTokens: T,
    seqIds: Int32Array.from(seqs.map((s) => s.seqId)),
    tokens,
    positions,
    queryStart,
    contextLens,
    blockTables,
    blockTableStride: stride,
    // A model with a sliding-layer pool: the same ids there (the library sizes that pool for every prefill here).
    ...(info.slidingWindow !== undefined && info.slidingWindow > 0 ? { slidingBlockTables: blockTables.slice() } : {}),
    ...neutralStepFields(B),
  };
}

export function resultBuffers(info: BackendInfo, numSeqs: number): StepResult {
  const K1 = info.maxDrafts + 1;
  return {
    counts: new Int32Array(numSeqs),
    tokens: new Int32Array(numSeqs * K1),
    logprobs: new Float32Array(numSeqs * K1),
    topIds: new Int32Array(numSeqs * K1 * info.maxTopLogprobs),
    topLogprobs: new Float32Array(numSeqs * K1 * info.maxTopLogprobs),
  };
}

/** Index of the largest value, ties to the lowest index. */
export function argmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/** One sequence of a general step: `fed` tokens ending at `contextLen - 1`, the last `drafts` of them drafts. */
export interface StepSeq {
  readonly seqId: number;
  readonly fed: readonly number[];
  readonly contextLen: number;
  readonly drafts?: number;
  readonly blocks: readonly number[];
  readonly history?: readonly number[];
  readonly historyPromptLen?: number;
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly repetitionPenalty?: number;
  readonly frequencyPenalty?: number;
  readonly seed?: bigint;
  readonly logprobs?: number;
}

export function stepBatch(seqs: readonly StepSeq[]): StepBatch {
  const base = prefillBatch(
    { blockSize: 1 << 30 } as BackendInfo,
    seqs.map((s) => ({ seqId: s.seqId, tokens: s.fed })),
  );
  const B = seqs.length;
  const stride = Math.max(1, ...seqs.map((s) => s.blocks.length));
  const blockTables = new Int32Array(B * stride).fill(-1);
  const history: number[] = [];
  const historyStart = new Int32Array(B + 1);
  seqs.forEach((s, i) => {
    const first = s.contextLen - s.fed.length;
    for (let j = 0; j < s.fed.length; j++) base.positions[base.queryStart[i]! + j] = first + j;
    base.contextLens[i] = s.contextLen;
    base.draftCounts[i] = s.drafts ?? 0;
    s.blocks.forEach((b, j) => (blockTables[i * stride + j] = b));
    historyStart[i] = history.length;
    history.push(...(s.history ?? []));
    base.historyPromptLens[i] = s.historyPromptLen ?? 0;
    base.sampling.temperature[i] = s.temperature ?? 0;
    base.sampling.topK[i] = s.topK ?? 0;
    base.sampling.topP[i] = s.topP ?? 1;
    base.sampling.repetitionPenalty[i] = s.repetitionPenalty ?? 1;
    base.sampling.frequencyPenalty[i] = s.frequencyPenalty ?? 0;
    base.sampling.seeds[i] = s.seed ?? 7n;
    base.sampling.logprobs[i] = s.logprobs ?? -1;
  });
  historyStart[B] = history.length;
  return { ...base, blockTables, blockTableStride: stride, historyStart, history: Int32Array.from(history) };
}
