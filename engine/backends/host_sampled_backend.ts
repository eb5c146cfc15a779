/**
 * The host sampler as a Backend: wraps a LogitsBackend (ONNX Runtime) and applies docs/backend-step.md's sampling
 * and verification rule in JavaScript (engine/sampler.ts). It is the CPU reference the native devices' samplers are
 * compared with, so it follows the rule to the letter: logprobs of the raw logits, penalties over the history plus
 * the drafts accepted before a row, the mask, then greedy or a Philox draw keyed by the position the token takes.
 */
import { logSumExp, type PenaltyHistory, penaltyHistory, type RowSampling, Sampler, topIds } from "../sampler.ts";
import { penalised, readRow } from "../sampling_fields.ts";
import type { Backend, BackendInfo, StepBatch, StepResult } from "../step_batch.ts";
import { checkStepBatch, checkStepResult } from "./check_step_batch.ts";
import type { LogitsBackend } from "./logits_backend.ts";

/** The engine-facing limits a host-sampled backend advertises (the logits backend knows nothing of blocks). */
export interface HostSampledOptions {
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly maxBatchTokens: number;
  readonly maxSeqs: number;
  readonly maxDrafts: number;
  readonly maxTopLogprobs: number;
}

export class HostSampledBackend implements Backend {
  readonly info: BackendInfo;
  readonly inner: LogitsBackend;
  readonly #sampler = new Sampler();

  constructor(inner: LogitsBackend, options: HostSampledOptions) {
    for (const [k, v] of Object.entries(options)) {
      if (!Number.isInteger(v) || v < (k === "maxDrafts" || k === "maxTopLogprobs" ? 0 : 1)) {
        throw new RangeError(`host sampled backend: ${k} must be a positive integer, got ${v}`);
      }
    }
    this.inner = inner;
    this.info = {
      vocabSize: inner.vocabSize,
      maxPositions: inner.maxPositions,
      sharesPrefixBlocks: inner.sharesPrefixBlocks,
      ...options,
    };
  }

  async step(batch: StepBatch, result: StepResult): Promise<void> {
    checkStepBatch(batch, this.info);
    checkStepResult(result, this.info, batch.numSeqs);
    const rows = await this.inner.forward(batch);
    const V = this.info.vocabSize;
    const width = this.info.maxDrafts + 1;
    const maxTop = this.info.maxTopLogprobs;
    const words = Math.ceil(V / 32);
    let row = 0;
    for (let i = 0; i < batch.numSeqs; i++) {
      result.counts[i] = 0;
      if (batch.sampleFlags[i] !== 1) continue;
      const d = batch.draftCounts[i]!;
      const q1 = batch.queryStart[i + 1]!;
      const sampling = readRow(batch.sampling, i);
      const params: RowSampling = { ...sampling, seed: sampling.seeds };
      const h0 = batch.historyStart[i]!;
      const h1 = batch.historyStart[i + 1]!;
      const withHistory = penalised(sampling);
      const history = batch.history.subarray(h0, h1);
      const promptLen = batch.historyPromptLens[i]!;
      const b0 = batch.biasStart[i]!;
      const b1 = batch.biasStart[i + 1]!;
      const bias = b1 > b0
        ? { ids: batch.biasIds.subarray(b0, b1), values: batch.biasValues.subarray(b0, b1) }
        : undefined;
      const maskStart = batch.maskRowStart[i]!;
      const nTop = batch.sampling.logprobs[i]!;
      const accepted: number[] = [];
      for (let r = 0; r <= d; r++) {
        const logits = rows.subarray((row + r) * V, (row + r + 1) * V);
        // The row follows fed position q1 - 1 - d + r; its token takes the next position.
        const position = batch.positions[q1 - 1 - d + r]! + 1;
        const pen: PenaltyHistory | undefined = withHistory ? penaltyHistory(history, promptLen, accepted) : undefined;
        const mask = maskStart < 0
          ? undefined
          : batch.allowedMask.subarray((maskStart + r) * words, (maskStart + r + 1) * words);
        const token = this.#sampler.sample(logits, params, position, pen, mask, bias);
        const slot = i * width + accepted.length;
        result.tokens[slot] = token;
        if (nTop >= 0) {
          const logZ = logSumExp(logits);
          result.logprobs[slot] = logits[token]! - logZ;
          const ids = topIds(logits, nTop);
          for (let j = 0; j < ids.length; j++) {
            result.topIds[slot * maxTop + j] = ids[j]!;
            result.topLogprobs[slot * maxTop + j] = logits[ids[j]!]! - logZ;
          }
        }
        accepted.push(token);
        // Drafts are point proposals: accepted while the target's own token equals them.
        if (r < d && token !== batch.tokens[q1 - d + r]) break;
      }
      result.counts[i] = accepted.length;
      row += d + 1;
    }
  }

  release(seqId: number): void {
    this.inner.release(seqId);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
