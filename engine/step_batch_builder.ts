/**
 * Packs one engine step into the struct-of-arrays StepBatch (docs/backend-step.md). Every buffer is allocated once,
 * at the backend's largest batch (maxSeqs sequences, maxBatchTokens tokens), and reused step after step; only the
 * penalty history and the logit-bias lists grow, and only when a request uses them.
 */
import { allocSampling, penalised, type SamplingArrays, type SamplingRow, writeRow } from "./sampling_fields.ts";
import type { BackendInfo, StepBatch, StepResult } from "./step_batch.ts";
import { fillDraftMasks, maskWords, type TokenConstraint } from "./token_constraint.ts";

/** One sequence's share of a step: its sampling row (engine/sampling_fields.ts) and what it feeds. */
export interface StepEntry extends SamplingRow {
  readonly seqId: number;
  /** The sequence's known tokens (prompt then generated); the step feeds `tokens[from .. to)` then `drafts`. */
  readonly tokens: Int32Array;
  readonly from: number;
  readonly to: number;
  readonly drafts: readonly number[];
  /** Whether the step samples (false for a prefill chunk that does not reach the end of the known tokens). */
  readonly sample: boolean;
  /** Block ids holding positions 0 .. contextLen (contextLen = to + drafts.length). */
  readonly blocks: readonly number[];
  /** With a backend's sliding pool (`info.slidingWindow` > 0): its block ids for the same positions, -1 before the
   * window (required then). */
  readonly slidingBlocks?: readonly number[];
  /** Token id → bias added to its logit (absent or empty: none). */
  readonly logitBias?: ReadonlyMap<number, number>;
  /** Prompt length, for the penalties' history (the known tokens up to `to`). */
  readonly promptLength: number;
  /** Grammar of a constrained sequence: its mask rows (one per sampled position) are filled from it. */
  readonly constraint?: TokenConstraint;
  /**
   * Drafts the backend's draft model should propose after this step's accepted tokens (default 0); `blocks` must then
   * cover contextLen + propose positions.
   */
  readonly propose?: number;
}

export class StepBatchBuilder {
  readonly info: BackendInfo;
  readonly stride: number;
  readonly seqIds: Int32Array;
  readonly tokens: Int32Array;
  readonly positions: Int32Array;
  readonly queryStart: Int32Array;
  readonly contextLens: Int32Array;
  readonly draftCounts: Int32Array;
  readonly sampleFlags: Uint8Array;
  readonly blockTables: Int32Array;
  /** Rows like blockTables for the sliding pool; empty when the backend has none. */
  readonly slidingBlockTables: Int32Array;
  readonly sampling: SamplingArrays;
  readonly maskRowStart: Int32Array;
  readonly proposeCounts: Int32Array;
  /** Mask rows, allocated at their largest (maxSeqs × (maxDrafts + 1) rows) on the first constrained entry. */
  #allowedMask = new Uint32Array(0);
  #maskRows = 0;
  readonly historyStart: Int32Array;
  readonly historyPromptLens: Int32Array;
  #history = new Int32Array(0);
  readonly biasStart: Int32Array;
  #biasIds = new Int32Array(0);
  #biasValues = new Float32Array(0);
  #biasLength = 0;
  readonly result: StepResult;
  #numSeqs = 0;
  #numTokens = 0;
  #historyLength = 0;

  /** `maxContext`: the longest context a sequence may reach (sizes the block table rows). */
  constructor(info: BackendInfo, maxContext: number) {
    this.info = info;
    const B = info.maxSeqs;
    const T = info.maxBatchTokens;
    this.stride = Math.ceil(maxContext / info.blockSize);
    this.seqIds = new Int32Array(B);
    this.tokens = new Int32Array(T);
    this.positions = new Int32Array(T);
    this.queryStart = new Int32Array(B + 1);
    this.contextLens = new Int32Array(B);
    this.draftCounts = new Int32Array(B);
    this.sampleFlags = new Uint8Array(B);
    this.blockTables = new Int32Array(B * this.stride).fill(-1);
    const sliding = info.slidingWindow !== undefined && info.slidingWindow > 0;
    this.slidingBlockTables = new Int32Array(sliding ? B * this.stride : 0).fill(-1);
    this.sampling = allocSampling(B);
    this.maskRowStart = new Int32Array(B).fill(-1);
    this.proposeCounts = new Int32Array(B);
    this.historyStart = new Int32Array(B + 1);
    this.historyPromptLens = new Int32Array(B);
    this.biasStart = new Int32Array(B + 1);
    const W = info.maxDrafts + 1;
    this.result = {
      counts: new Int32Array(B),
      tokens: new Int32Array(B * W),
      logprobs: new Float32Array(B * W),
      topIds: new Int32Array(B * W * info.maxTopLogprobs),
      topLogprobs: new Float32Array(B * W * info.maxTopLogprobs),
      proposedCounts: new Int32Array(B),
      proposed: new Int32Array(B * info.maxDrafts),
    };
  }

  get numSeqs(): number {
    return this.#numSeqs;
  }

  get numTokens(): number {
    return this.#numTokens;
  }

  reset(): void {
    for (let i = 0; i < this.#numSeqs; i++) this.blockTables.fill(-1, i * this.stride, (i + 1) * this.stride);
    this.slidingBlockTables.fill(-1, 0, this.#numSeqs * this.stride);
    this.#numSeqs = 0;
    this.#numTokens = 0;
    this.#historyLength = 0;
    this.#biasLength = 0;
    this.#maskRows = 0;
  }

  /** Whether one more sequence feeding `fed` tokens fits. */
  fits(fed: number): boolean {
    return this.#numSeqs < this.info.maxSeqs && this.#numTokens + fed <= this.info.maxBatchTokens;
  }

  add(e: StepEntry): void {
    const i = this.#numSeqs;
    const fed = e.to - e.from + e.drafts.length;
    if (!this.fits(fed)) throw new Error("step batch builder: the step is full");
    const contextLen = e.to + e.drafts.length;
    let t = this.#numTokens;
    this.seqIds[i] = e.seqId;
    this.queryStart[i] = t;
    for (let p = e.from; p < e.to; p++, t++) {
      this.tokens[t] = e.tokens[p]!;
      this.positions[t] = p;
    }
    for (let k = 0; k < e.drafts.length; k++, t++) {
      this.tokens[t] = e.drafts[k]!;
      this.positions[t] = e.to + k;
    }
    this.queryStart[i + 1] = t;
    this.#numTokens = t;
    this.contextLens[i] = contextLen;
    this.draftCounts[i] = e.drafts.length;
    this.sampleFlags[i] = e.sample ? 1 : 0;
    const row = i * this.stride;
    for (let j = 0; j < e.blocks.length; j++) this.blockTables[row + j] = e.blocks[j]!;
    if (this.slidingBlockTables.length > 0) {
      if (e.slidingBlocks === undefined) throw new Error("step batch builder: the backend needs sliding block tables");
      for (let j = 0; j < e.slidingBlocks.length; j++) this.slidingBlockTables[row + j] = e.slidingBlocks[j]!;
    }
    writeRow(this.sampling, i, e, this.info);
    this.maskRowStart[i] = -1;
    this.proposeCounts[i] = e.propose ?? 0;
    if (e.constraint !== undefined && e.sample) {
      const words = maskWords(this.info.vocabSize);
      if (this.#allowedMask.length === 0) {
        this.#allowedMask = new Uint32Array(this.info.maxSeqs * (this.info.maxDrafts + 1) * words);
      }
      // Drafts reach the batch only as far as the grammar allows them, so every row gets written.
      const rows = fillDraftMasks(e.constraint, e.drafts, this.#allowedMask, words, this.#maskRows);
      if (rows !== e.drafts.length + 1) throw new Error("step batch builder: a draft is outside the grammar");
      this.maskRowStart[i] = this.#maskRows;
      this.#maskRows += rows;
    }
    this.historyStart[i] = this.#historyLength;
    if (e.sample && penalised(e)) {
      const need = this.#historyLength + e.to;
      if (need > this.#history.length) {
        const grown = new Int32Array(Math.max(need, this.#history.length * 2));
        grown.set(this.#history.subarray(0, this.#historyLength));
        this.#history = grown;
      }
      this.#history.set(e.tokens.subarray(0, e.to), this.#historyLength);
      this.#historyLength = need;
      this.historyPromptLens[i] = Math.min(e.promptLength, e.to);
    } else this.historyPromptLens[i] = 0;
    this.historyStart[i + 1] = this.#historyLength;
    this.biasStart[i] = this.#biasLength;
    if (e.sample && e.logitBias !== undefined && e.logitBias.size > 0) {
      const need = this.#biasLength + e.logitBias.size;
      if (need > this.#biasIds.length) {
        const size = Math.max(need, this.#biasIds.length * 2);
        const ids = new Int32Array(size);
        const values = new Float32Array(size);
        ids.set(this.#biasIds.subarray(0, this.#biasLength));
        values.set(this.#biasValues.subarray(0, this.#biasLength));
        this.#biasIds = ids;
        this.#biasValues = values;
      }
      for (const [id, value] of e.logitBias) {
        this.#biasIds[this.#biasLength] = id;
        this.#biasValues[this.#biasLength] = value;
        this.#biasLength++;
      }
    }
    this.biasStart[i + 1] = this.#biasLength;
    this.#numSeqs = i + 1;
  }

  batch(): StepBatch {
    return {
      numSeqs: this.#numSeqs,
      numTokens: this.#numTokens,
      seqIds: this.seqIds,
      tokens: this.tokens,
      positions: this.positions,
      queryStart: this.queryStart,
      contextLens: this.contextLens,
      draftCounts: this.draftCounts,
      sampleFlags: this.sampleFlags,
      blockTables: this.blockTables,
      blockTableStride: this.stride,
      sampling: this.sampling,
      maskRowStart: this.maskRowStart,
      allowedMask: this.#allowedMask,
      historyStart: this.historyStart,
      history: this.#history,
      historyPromptLens: this.historyPromptLens,
      biasStart: this.biasStart,
      biasIds: this.#biasIds,
      biasValues: this.#biasValues,
      proposeCounts: this.proposeCounts,
      ...(this.slidingBlockTables.length > 0 ? { slidingBlockTables: this.slidingBlockTables } : {}),
    };
  }
}
