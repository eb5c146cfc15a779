/**
 * What a model backend does: run one batched forward step. Everything else (scheduling, sampling, speculation,
 * stop handling, cache accounting) belongs to the engine, so a native backend plugs in by implementing this alone.
 *
 * Cache protocol: a sequence is identified by `seqId`. Its first entry has `cachedLength === 0` and feeds the whole
 * prompt (prefill); later entries feed the last sampled token plus any drafts, with `cachedLength` equal to what the
 * backend holds for it. After a step every fed token is cached; the engine then calls `truncate` to drop rejected
 * drafts and `release` when the sequence ends. The backend owns the tensors; the engine owns the numbers.
 */
export interface BatchEntry {
  readonly seqId: number;
  /** Tokens to feed this step (at positions cachedLength, cachedLength + 1, ...). Never empty. */
  readonly tokens: readonly number[];
  /** Tokens already in this sequence's cache. 0 means a fresh sequence (prefill). */
  readonly cachedLength: number;
  /** How many trailing fed positions need logits: 1 for prefill/plain decode, 1 + drafts when verifying. */
  readonly logitsCount: number;
}

export interface StepOutput {
  /**
   * Logits of entry `i`: `logitsCount` rows of `vocabSize` floats, row r belonging to fed position
   * `tokens.length - logitsCount + r`. Views into backend buffers: valid until the next `step` call.
   */
  logits(i: number): Float32Array;
}

export interface Backend {
  readonly vocabSize: number;
  /** Largest position the model supports (context length). */
  readonly maxPositions: number;
  step(batch: readonly BatchEntry[]): Promise<StepOutput>;
  /** Keeps only the first `length` cached tokens of a sequence (speculative rollback). */
  truncate(seqId: number, length: number): void;
  /** Frees a sequence's cache. Unknown ids are ignored. */
  release(seqId: number): void;
  close(): Promise<void>;
}
