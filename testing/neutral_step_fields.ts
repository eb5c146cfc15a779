/**
 * The per-sequence fields of a StepBatch that say "nothing special" — no drafts, every sequence sampled, greedy with
 * no filter or penalty (seed 7), no logprobs, no mask, no penalty history, no logit bias — for tests and benches that
 * build batches by hand and set only what they exercise.
 */
import { allocSampling } from "../engine/sampling_fields.ts";
import type { StepBatch } from "../engine/step_batch.ts";

export type NeutralStepFields = Pick<
  StepBatch,
  | "draftCounts"
  | "sampleFlags"
  | "sampling"
  | "maskRowStart"
  | "allowedMask"
  | "historyStart"
  | "history"
  | "historyPromptLens"
  | "biasStart"
  | "biasIds"
  | "biasValues"
>;

export function neutralStepFields(B: number): NeutralStepFields {
  return {
    draftCounts: new Int32Array(B),
    sampleFlags: new Uint8Array(B).fill(1),
    sampling: allocSampling(B),
    maskRowStart: new Int32Array(B).fill(-1),
    allowedMask: new Uint32Array(0),
    historyStart: new Int32Array(B + 1),
    history: new Int32Array(0),
    historyPromptLens: new Int32Array(B),
    biasStart: new Int32Array(B + 1),
    biasIds: new Int32Array(0),
    biasValues: new Float32Array(0),
  };
}
