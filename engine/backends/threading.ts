/**
 * How many ONNX sessions (shards) and threads per session a model gets. Measured on a 2-core machine: the bundled
 * 2M-parameter models decode large batches faster as two 1-thread sessions (one on the main thread, one in a
 * worker) than as one 2-thread session, because their operators are too small to split across threads; a
 * Qwen2.5-0.5B-shaped model is the other way round (one stream: 13.3 vs 9.8 tokens/s; 8 streams: 62 vs 43), because
 * its matrix products split well and a second session costs a second copy of the weights. So small models keep
 * sharding, and models past SMALL_MODEL_PARAMS get one session with every core.
 */
import type { ModelConfig } from "../../checkpoint/model_dir.ts";

/** Below this many parameters, operators are too small for intra-op threads to pay off. */
export const SMALL_MODEL_PARAMS = 50e6;

/** Parameter count of a Llama-style decoder from its config (embeddings, attention, MLP, head). */
export function parameterCount(config: ModelConfig): number {
  const h = config.hiddenSize;
  const v = config.vocabSize;
  const q = config.numAttentionHeads * config.headDim;
  const kv = config.numKeyValueHeads * config.headDim;
  const raw = config.raw["intermediate_size"];
  const inter = typeof raw === "number" && raw > 0 ? raw : 4 * h;
  const tied = config.raw["tie_word_embeddings"] === true;
  const perLayer = 2 * h * q + 2 * h * kv + 3 * h * inter;
  return v * h * (tied ? 1 : 2) + config.numHiddenLayers * perLayer;
}

export interface Threading {
  /** ONNX sessions one step is split across (main thread + shards - 1 workers). */
  readonly shards: number;
  /** Intra-op threads of each session. */
  readonly threads: number;
}

/**
 * Shards and threads for a model of `params` parameters. "auto" shards: small models get two 1-thread sessions when
 * batches may exceed 8 sequences on 2+ cores (one otherwise); large ones one session. "auto" threads: 1 per session
 * for small models; all cores divided among the sessions for large ones.
 */
export function resolveThreading(options: {
  readonly params: number;
  readonly maxNumSeqs: number;
  readonly shards: number | "auto";
  readonly threads: number | "auto";
  readonly cores: number;
}): Threading {
  const cores = Math.max(1, options.cores);
  const small = options.params < SMALL_MODEL_PARAMS;
  const shards = options.shards !== "auto"
    ? options.shards
    : small && options.maxNumSeqs > 8
    ? Math.max(1, Math.min(2, cores))
    : 1;
  const threads = options.threads !== "auto" ? options.threads : small ? 1 : Math.max(1, Math.floor(cores / shards));
  return { shards, threads };
}
