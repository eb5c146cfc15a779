/**
 * Model directory → ready engine: reads the one model description (unless given), makes the backend through the
 * factory, and hands it to createEngine. What `rill serve`, the benchmarks and the tests use to open a model.
 */
import { type BackendOptions, createBackend } from "./backends/create_backend.ts";
import { createEngine, type EngineOptions, type LlmEngine } from "./llm_engine.ts";
import { contextLength, eosTokenIds, type ModelDir, readModelDir } from "../checkpoint/model_dir.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";

export interface OpenEngineOptions extends Omit<EngineOptions, "tokenizer" | "eosTokenIds"> {
  readonly modelDir: string;
  /** The directory as already read; read from `modelDir` when absent. */
  readonly model?: Pick<ModelDir, "dir" | "config" | "generationConfig" | "tokenizer" | "tokenizerConfig" | "weights">;
  /** Default: the model's tokenizer. */
  readonly tokenizer?: Tokenizer;
  /** Default: the model's eos ids (generation_config.json and config.json). */
  readonly eosTokenIds?: readonly number[];
  /** Backend choice and sizing; the engine's own options fill in sequences, context and drafts. */
  readonly backend?: Omit<BackendOptions, "maxNumSeqs" | "maxModelLen" | "maxDrafts" | "maxNumBatchedTokens">;
}

function baseName(dir: string): string {
  const trimmed = dir.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1);
}

export async function openEngine(options: OpenEngineOptions): Promise<LlmEngine> {
  const model = options.model ?? await readModelDir(options.modelDir);
  const modelMax = contextLength(model);
  const maxModelLen = Math.min(options.maxModelLen ?? modelMax, modelMax);
  const maxNumSeqs = options.maxNumSeqs ?? 32;
  const numSpeculativeTokens = options.numSpeculativeTokens ?? 4;
  const backend = await createBackend({ dir: options.modelDir, config: model.config, weights: model.weights }, {
    ...options.backend,
    maxNumSeqs,
    maxModelLen,
    maxDrafts: numSpeculativeTokens,
    ...(options.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: options.maxNumBatchedTokens }),
  });
  try {
    return createEngine(backend, {
      ...options,
      tokenizer: options.tokenizer ?? model.tokenizer,
      modelId: options.modelId ?? baseName(options.modelDir),
      eosTokenIds: options.eosTokenIds ?? eosTokenIds(model),
      maxModelLen,
      maxNumSeqs,
      numSpeculativeTokens,
    });
  } catch (e) {
    await backend.close();
    throw e;
  }
}
