/**
 * A test double for a backend with a draft model: it wraps a backend that verifies drafts (e.g. a HistoryBackend in
 * the host sampler) and answers `proposeCounts` itself the way the native library does. Its "draft model" is a
 * LogitsOf function read through a KV pool of token slots of its own, addressed by the step's block tables: every
 * fed token is written into it, then each proposing sequence's last accepted token and its proposals are written at
 * the positions after it (the lookahead slots) while it proposes greedily. So the engine's side of the contract is
 * checked on every step: lookahead positions up to contextLens + proposeCounts must have a block of the pool, that
 * block must not be listed by any other sequence of the step, and the draft's own history (what prefix-cache hits and
 * recomputes left in the pool) must hold a token at every position it reads.
 */
import type { Backend, BackendInfo, StepBatch, StepResult } from "../engine/step_batch.ts";
import type { LogitsOf } from "./history_backend.ts";

export class ProposingBackend implements Backend {
  readonly info: BackendInfo;
  readonly inner: Backend;
  readonly #draftLogits: LogitsOf;
  readonly #slots: Int32Array;
  #history = new Int32Array(0);
  readonly #row: Float32Array;
  /** Proposals asked for and written, over all steps. */
  asked = 0;
  proposed = 0;

  constructor(inner: Backend, draftLogits: LogitsOf) {
    this.inner = inner;
    this.info = { ...inner.info, proposesDrafts: true };
    this.#draftLogits = draftLogits;
    this.#slots = new Int32Array(inner.info.numBlocks * inner.info.blockSize).fill(-1);
    this.#row = new Float32Array(inner.info.vocabSize);
  }

  #slot(batch: StepBatch, i: number, position: number): number {
    const bs = this.info.blockSize;
    const j = Math.floor(position / bs);
    const block = j < batch.blockTableStride ? batch.blockTables[i * batch.blockTableStride + j]! : -1;
    if (!(block >= 0 && block < this.info.numBlocks)) {
      throw new Error(`proposing backend: sequence ${batch.seqIds[i]} has no block for position ${position}`);
    }
    return block * bs + (position % bs);
  }

  async step(batch: StepBatch, result: StepResult): Promise<void> {
    const { proposeCounts, ...verify } = batch;
    await this.inner.step(verify, result);
    for (let i = 0; i < batch.numSeqs; i++) {
      for (let t = batch.queryStart[i]!; t < batch.queryStart[i + 1]!; t++) {
        this.#slots[this.#slot(batch, i, batch.positions[t]!)] = batch.tokens[t]!;
      }
    }
    if (proposeCounts === undefined) return;
    const { proposedCounts, proposed } = result;
    if (proposedCounts === undefined || proposed === undefined) throw new Error("proposing backend: no result buffers");
    this.#checkLookahead(batch, proposeCounts);
    const KD = this.info.maxDrafts;
    for (let i = 0; i < batch.numSeqs; i++) {
      proposedCounts[i] = 0;
      const k = proposeCounts[i]!;
      if (k === 0) continue;
      if (!(k > 0 && k <= KD && batch.sampleFlags[i] === 1)) {
        throw new Error(`proposing backend: proposeCounts[${i}] = ${k}`);
      }
      this.asked += k;
      const n = result.counts[i]!;
      const last = batch.contextLens[i]! - batch.draftCounts[i]! + n - 1;
      this.#slots[this.#slot(batch, i, last)] = result.tokens[i * (KD + 1) + n - 1]!;
      if (this.#history.length < last + 1 + k) this.#history = new Int32Array(2 * (last + 1 + k));
      for (let p = 0; p <= last; p++) {
        const token = this.#slots[this.#slot(batch, i, p)]!;
        if (token < 0) throw new Error(`proposing backend: sequence ${batch.seqIds[i]} has no draft KV at ${p}`);
        this.#history[p] = token;
      }
      for (let j = 0; j < k; j++) {
        this.#draftLogits(this.#history, last + 1 + j, this.#row);
        let best = 0;
        for (let v = 1; v < this.#row.length; v++) if (this.#row[v]! > this.#row[best]!) best = v;
        proposed[i * KD + j] = best;
        this.#history[last + 1 + j] = best;
        // The last proposal is not fed to the draft model (nothing follows it), as in the native library.
        if (j < k - 1) this.#slots[this.#slot(batch, i, last + 1 + j)] = best;
      }
      proposedCounts[i] = k;
      this.proposed += k;
    }
  }

  /** Lookahead blocks (positions contextLens .. contextLens + k) belong to their sequence alone in this step. */
  #checkLookahead(batch: StepBatch, proposeCounts: Int32Array): void {
    const bs = this.info.blockSize;
    const owner = new Map<number, number>();
    for (let i = 0; i < batch.numSeqs; i++) {
      const ctx = batch.contextLens[i]!;
      for (let p = ctx; p < ctx + proposeCounts[i]!; p++) {
        owner.set(Math.floor(this.#slot(batch, i, p) / bs), i);
      }
    }
    for (let i = 0; i < batch.numSeqs; i++) {
      const used = Math.ceil((batch.contextLens[i]! + proposeCounts[i]!) / bs);
      for (let j = 0; j < used; j++) {
        const block = batch.blockTables[i * batch.blockTableStride + j]!;
        const o = owner.get(block);
        if (o !== undefined && o !== i) {
          throw new Error(`proposing backend: block ${block} is lookahead of sequence ${o} and listed by ${i}`);
        }
      }
    }
  }

  release(seqId: number): void {
    this.inner.release(seqId);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
