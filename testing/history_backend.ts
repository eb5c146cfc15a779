/**
 * A deterministic fake model for engine tests: its logits are a pure function of the token history (every token
 * at positions 0 .. p for the row after position p), and it reads that history back through the batch's block
 * tables from a KV pool of token slots. So a wrong block table, a prefix block shared by mistake, a rollback that
 * kept a rejected draft, or a chunk fed at the wrong position changes the logits and therefore the tokens: engine
 * features (prefix caching, preemption and recompute, chunked prefill, speculation) can be checked for identical
 * output cheaply. It shares prefix blocks (what it reads is exactly what was written into the listed blocks).
 */
import type { LogitsBackend } from "../engine/backends/logits_backend.ts";
import { HostSampledBackend, type HostSampledOptions } from "../engine/backends/host_sampled_backend.ts";
import type { StepBatch } from "../engine/step_batch.ts";

/** Logits after `history` (history[0 .. length)); must return `vocabSize` values. */
export type LogitsOf = (history: Int32Array, length: number, out: Float32Array) => void;

/** Pseudo-random logits seeded by a hash of the whole history: every token of the past matters. */
export function hashedLogits(vocabSize: number, spread = 4): LogitsOf {
  return (history, length, out) => {
    let h = 0x811c9dc5;
    for (let i = 0; i < length; i++) h = Math.imul(h ^ history[i]!, 0x01000193);
    for (let v = 0; v < vocabSize; v++) {
      let x = Math.imul(h ^ Math.imul(v + 1, 0x9e3779b1), 0x85ebca6b);
      x ^= x >>> 13;
      x = Math.imul(x, 0xc2b2ae35);
      x ^= x >>> 16;
      out[v] = ((x >>> 0) / 4294967296) * spread;
    }
  };
}

export interface HistoryBackendOptions {
  readonly vocabSize: number;
  /** Default: the pool's size in tokens, at most 4096. */
  readonly maxPositions?: number;
  readonly blockSize?: number;
  readonly numBlocks: number;
  readonly logitsOf?: LogitsOf;
  /** Step number (1-based) whose forward rejects with "device lost". */
  readonly failAt?: number;
}

export class HistoryBackend implements LogitsBackend {
  readonly vocabSize: number;
  readonly maxPositions: number;
  readonly sharesPrefixBlocks = true;
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly #slots: Int32Array;
  readonly #logitsOf: LogitsOf;
  readonly #failAt: number;
  #rows = new Float32Array(0);
  #history = new Int32Array(0);
  steps = 0;
  /** Tokens fed over all steps (a prefix-cache hit feeds fewer). */
  fedTokens = 0;
  /** Most tokens one sequence fed in one step (a chunked prefill feeds at most the chunk). */
  maxFed = 0;
  /** Most sequences in one step. */
  maxSeqs = 0;
  /** Sequences seen and not released. */
  readonly live = new Set<number>();
  readonly released: number[] = [];

  constructor(options: HistoryBackendOptions) {
    this.vocabSize = options.vocabSize;
    this.blockSize = options.blockSize ?? 16;
    this.numBlocks = options.numBlocks;
    // By default one sequence may fill the whole pool (the engine requires the pool to hold one full context).
    this.maxPositions = options.maxPositions ?? Math.min(4096, this.numBlocks * this.blockSize);
    this.#slots = new Int32Array(this.numBlocks * this.blockSize).fill(-1);
    this.#logitsOf = options.logitsOf ?? hashedLogits(this.vocabSize);
    this.#failAt = options.failAt ?? 0;
  }

  /** Wrapped in the host sampler, with this backend's pool as the engine's. */
  sampled(options: Partial<HostSampledOptions> = {}): HostSampledBackend {
    return new HostSampledBackend(this, {
      blockSize: this.blockSize,
      numBlocks: this.numBlocks,
      maxBatchTokens: 4096,
      maxSeqs: 64,
      maxDrafts: 4,
      maxTopLogprobs: 20,
      ...options,
    });
  }

  #slot(batch: StepBatch, i: number, position: number): number {
    const block = batch.blockTables[i * batch.blockTableStride + Math.floor(position / this.blockSize)]!;
    if (!(block >= 0 && block < this.numBlocks)) throw new Error(`history backend: no block for position ${position}`);
    return block * this.blockSize + (position % this.blockSize);
  }

  forward(batch: StepBatch): Promise<Float32Array> {
    if (++this.steps === this.#failAt) return Promise.reject(new Error("device lost"));
    const V = this.vocabSize;
    let rows = 0;
    for (let i = 0; i < batch.numSeqs; i++) if (batch.sampleFlags[i] === 1) rows += batch.draftCounts[i]! + 1;
    if (this.#rows.length < rows * V) this.#rows = new Float32Array(rows * V);
    this.maxSeqs = Math.max(this.maxSeqs, batch.numSeqs);
    // Writes first (all sequences), then reads: a sequence may read a block another one wrote in this very step only
    // if the engine shared a block that was not computed yet, which the check below turns into an error.
    for (let i = 0; i < batch.numSeqs; i++) {
      this.live.add(batch.seqIds[i]!);
      const q0 = batch.queryStart[i]!;
      const q1 = batch.queryStart[i + 1]!;
      this.fedTokens += q1 - q0;
      this.maxFed = Math.max(this.maxFed, q1 - q0);
      for (let t = q0; t < q1; t++) this.#slots[this.#slot(batch, i, batch.positions[t]!)] = batch.tokens[t]!;
    }
    let row = 0;
    for (let i = 0; i < batch.numSeqs; i++) {
      if (batch.sampleFlags[i] !== 1) continue;
      const q1 = batch.queryStart[i + 1]!;
      const d = batch.draftCounts[i]!;
      const ctx = batch.contextLens[i]!;
      if (this.#history.length < ctx) this.#history = new Int32Array(ctx * 2);
      for (let p = 0; p < ctx; p++) {
        const tok = this.#slots[this.#slot(batch, i, p)]!;
        if (tok < 0) throw new Error(`history backend: sequence ${batch.seqIds[i]} reads unwritten position ${p}`);
        this.#history[p] = tok;
      }
      for (let r = 0; r <= d; r++) {
        const p = batch.positions[q1 - 1 - d + r]!;
        this.#logitsOf(this.#history, p + 1, this.#rows.subarray((row + r) * V, (row + r + 1) * V));
      }
      row += d + 1;
    }
    return Promise.resolve(this.#rows.subarray(0, rows * V));
  }

  release(seqId: number): void {
    this.live.delete(seqId);
    this.released.push(seqId);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
