/**
 * A backend that runs the model but does not sample: it returns logits rows to JavaScript, and the host sampler
 * (HostSampledBackend) turns them into tokens. ONNX Runtime backends are of this kind.
 */
import type { StepBatch } from "../step_batch.ts";

export interface LogitsBackend {
  readonly vocabSize: number;
  /** Largest position the model supports (context length). */
  readonly maxPositions: number;
  /**
   * True when a sequence may start with a context longer than what it feeds (its first blocks shared from another
   * sequence's identical prefix). A backend that keeps each sequence's cache privately answers false.
   */
  readonly sharesPrefixBlocks: boolean;
  /**
   * Runs the step's forward pass. Returns, for each sequence with `sampleFlags[i] = 1` in batch order,
   * `draftCounts[i] + 1` rows of `vocabSize` floats: the logits after its last `draftCounts[i] + 1` fed positions.
   * The rows are views into backend buffers, valid until the next call. Rollback is implicit, as in the batch
   * contract: a sequence whose `contextLens - fed` is below what it holds keeps only that many tokens.
   */
  forward(batch: StepBatch): Promise<Float32Array>;
  /** Forgets a sequence's cache. Unknown ids are ignored. */
  release(seqId: number): void;
  close(): Promise<void>;
}
