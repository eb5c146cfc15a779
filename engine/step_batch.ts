/**
 * The packed batch of one engine step and what a backend returns for it (docs/backend-step.md is the contract).
 * Struct of arrays, typed arrays only, so a native backend passes the buffers to C unchanged. The engine allocates
 * these once at their largest size and reuses them: counts (`numSeqs`, `numTokens`) say how much of each is live.
 */
import type { SamplingArrays } from "./sampling_fields.ts";

export type { SamplingArrays };

export interface StepBatch {
  readonly numSeqs: number;
  readonly numTokens: number;
  readonly seqIds: Int32Array;
  readonly tokens: Int32Array;
  readonly positions: Int32Array;
  /** numSeqs + 1 entries: sequence i feeds tokens[queryStart[i] .. queryStart[i + 1]). */
  readonly queryStart: Int32Array;
  /** KV tokens of each sequence after this step (cached before + fed now). */
  readonly contextLens: Int32Array;
  /** Trailing fed tokens that are drafts to verify. */
  readonly draftCounts: Int32Array;
  /** 1: sample this sequence this step; 0: an intermediate prefill chunk. */
  readonly sampleFlags: Uint8Array;
  /** numSeqs × blockTableStride block ids; -1 past a sequence's last block. */
  readonly blockTables: Int32Array;
  readonly blockTableStride: number;
  readonly sampling: SamplingArrays;
  /** -1: unconstrained; else the first of the sequence's draftCounts + 1 rows of `allowedMask`. */
  readonly maskRowStart: Int32Array;
  /** Rows of ceil(vocabSize / 32) words; bit t set ⇒ token t allowed. */
  readonly allowedMask: Uint32Array;
  /** numSeqs + 1 entries into `history` (penalties only; empty ranges for sequences without penalties). */
  readonly historyStart: Int32Array;
  readonly history: Int32Array;
  readonly historyPromptLens: Int32Array;
  /** numSeqs + 1 entries: sequence i's logit bias is `biasIds/biasValues[biasStart[i] .. biasStart[i + 1])`. */
  readonly biasStart: Int32Array;
  /** Token ids (distinct within a sequence, in the vocabulary). */
  readonly biasIds: Int32Array;
  /** Finite values added to those tokens' logits, after the penalties and before the mask. */
  readonly biasValues: Float32Array;
  /**
   * Draft tokens the backend's draft model should propose after each sequence's accepted tokens (0..maxDrafts, only
   * on sampled sequences; absent or all 0: none). The block table must then cover contextLens[i] + proposeCounts[i]
   * positions: the draft model writes its own KV for them. Only backends with `proposesDrafts` accept nonzero counts.
   */
  readonly proposeCounts?: Int32Array;
  /**
   * With a backend reporting `slidingWindow` W > 0 (required then, ignored otherwise): numSeqs × blockTableStride ids
   * of the sliding-layer pool. Row i maps block j of the sequence for j from max(0, p0 − W + 1) / blockSize (p0: its
   * first fed position) through (contextLens[i] − 1) / blockSize; entries before are -1 (blocks out of the window,
   * given back) and not read.
   */
  readonly slidingBlockTables?: Int32Array;
}

/** Caller-owned result buffers; row i of each has room for maxDrafts + 1 tokens. */
export interface StepResult {
  /** Accepted tokens of sequence i (1..draftCounts[i] + 1 when sampled, 0 otherwise). */
  readonly counts: Int32Array;
  readonly tokens: Int32Array;
  /** Log-softmax of the raw logits (temperature 1, before penalties and masks) at each accepted token. */
  readonly logprobs: Float32Array;
  /** numSeqs × (maxDrafts + 1) × maxTopLogprobs, most likely first, ties to the lower id. */
  readonly topIds: Int32Array;
  readonly topLogprobs: Float32Array;
  /** Draft tokens proposed per sequence (written when the batch has proposeCounts). */
  readonly proposedCounts?: Int32Array;
  /** numSeqs × maxDrafts: the draft model's greedy continuation of the accepted tokens. */
  readonly proposed?: Int32Array;
}

export interface BackendInfo {
  readonly vocabSize: number;
  readonly maxPositions: number;
  /** Tokens per KV block. */
  readonly blockSize: number;
  /** Blocks in the backend's KV pool (block ids are 0 .. numBlocks - 1). */
  readonly numBlocks: number;
  /** Most fed tokens in one step. */
  readonly maxBatchTokens: number;
  /** Most sequences in one step. */
  readonly maxSeqs: number;
  readonly maxDrafts: number;
  readonly maxTopLogprobs: number;
  /** True when sequences may share identical prefix blocks (the engine then runs a prefix cache). */
  readonly sharesPrefixBlocks: boolean;
  /** True when the backend runs a draft model that proposes drafts (`proposeCounts`); absent means false. */
  readonly proposesDrafts?: boolean;
  /**
   * > 0: the model's sliding-window layers keep their KV in a second pool of `numSlidingBlocks` blocks, addressed by
   * `slidingBlockTables`, in which a sequence needs only the blocks its window reaches. Absent or 0: one pool.
   */
  readonly slidingWindow?: number;
  readonly numSlidingBlocks?: number;
}

/**
 * What every backend implements: one call per engine step. A backend that only yields logits (ONNX Runtime) is
 * wrapped in the host sampler, which implements this interface around it.
 */
export interface Backend {
  readonly info: BackendInfo;
  /** Runs the step and fills `result` for its `numSeqs` sequences. Rejects a malformed batch with an Error naming the field. */
  step(batch: StepBatch, result: StepResult): Promise<void>;
  /** Forgets per-sequence state kept beyond the KV blocks. Unknown ids are ignored. */
  release(seqId: number): void;
  close(): Promise<void>;
}
