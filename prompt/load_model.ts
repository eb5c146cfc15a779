import type { ChatFormat } from "./chat_format.ts";
import { createHarmonyFormat, type HarmonyFormatOptions } from "./harmony_format.ts";
import type { HfTokenizer } from "../checkpoint/hf_tokenizer.ts";
import {
  type ChatFormatName,
  contextLength,
  eosTokenIds as modelEosTokenIds,
  type GenerationConfig,
  type ModelConfig,
  ModelDirError,
  readModelDir,
  type TokenizerConfig,
  type WeightFiles,
} from "../checkpoint/model_dir.ts";
import { createTemplateFormat } from "./template_format.ts";

/**
 * The one model description: config.json, generation_config.json and the tokenizer files read once and validated
 * (checkpoint/model_dir.ts), plus the chat format. Backends and the engine take their numbers from here; the backend
 * opens its weight files itself.
 */
export interface LoadedModel {
  readonly dir: string;
  /** The directory's base name (what clients send as `model`). */
  readonly modelId: string;
  readonly config: ModelConfig;
  readonly generationConfig: GenerationConfig | undefined;
  readonly tokenizerConfig: TokenizerConfig;
  readonly tokenizer: HfTokenizer;
  readonly format: ChatFormat;
  readonly formatName: ChatFormatName;
  /** The weight files found (each backend reads only its own). */
  readonly weights: WeightFiles;
  /** Longest prompt + output the model takes (contextLength in checkpoint/model_dir.ts). */
  readonly maxModelLen: number;
  /** EOS ids from generation_config.json and config.json (the format's stopTokens may add more). */
  readonly eosTokenIds: readonly number[];
}

export interface LoadModelOptions {
  /** One line per loading stage with timing, e.g. `tokenizer.json: 1024 tokens, byte-level (12 ms)`. */
  readonly onProgress?: (message: string) => void;
  readonly harmony?: HarmonyFormatOptions;
  /** Qwen3-style `enable_thinking` for template formats. Default true. */
  readonly enableThinking?: boolean;
  /**
   * The clock prompts read today's date from at each render (harmony's `Current date:`, templates' `strftime_now`).
   * Default the system clock; tests that compare rendered prompts pin it.
   */
  readonly now?: () => Date;
}

/**
 * The chat format a model speaks: config.json's `rill.chat_format` when set; otherwise harmony for gpt-oss models
 * and tokenizers with a `<|channel|>` special; otherwise the model's own chat template.
 */
export function chooseChatFormat(config: ModelConfig, tokenizer: HfTokenizer): ChatFormatName {
  if (config.chatFormat !== undefined) return config.chatFormat;
  if (config.modelType === "gpt_oss" || tokenizer.specialId("<|channel|>") !== undefined) return "harmony";
  return "chatml";
}

function baseName(dir: string): string {
  const parts = dir.replace(/\/+$/, "").split("/");
  return parts[parts.length - 1] || dir;
}

export async function loadModel(dir: string, options: LoadModelOptions = {}): Promise<LoadedModel> {
  const progress = options.onProgress ?? (() => {});
  const start = performance.now();
  const m = await readModelDir(dir, { onProgress: progress });

  const t0 = performance.now();
  const formatName = chooseChatFormat(m.config, m.tokenizer);
  let format: ChatFormat;
  switch (formatName) {
    case "harmony":
      try {
        format = createHarmonyFormat(m.tokenizer, {
          ...(options.now === undefined ? {} : { now: options.now }),
          ...options.harmony,
        });
      } catch (e) {
        throw new ModelDirError(`${dir}: tokenizer.json: cannot use the harmony format: ${(e as Error).message}`);
      }
      break;
    case "chatml": {
      if (m.chatTemplate === undefined) {
        throw new ModelDirError(
          `${dir}: tokenizer_config.json: "chat_template" is missing (no chat_template.jinja either) and the model ` +
            `is not a harmony model`,
        );
      }
      const eosIds = [...m.config.eosTokenIds, ...(m.generationConfig?.eosTokenIds ?? [])];
      try {
        format = createTemplateFormat(m.tokenizer, m.chatTemplate, {
          bosToken: m.tokenizerConfig.bosToken,
          eosToken: m.tokenizerConfig.eosToken,
          toolUseTemplate: m.chatTemplates.tool_use,
          eosTokenIds: eosIds,
          ...(options.enableThinking === undefined ? {} : { enableThinking: options.enableThinking }),
          ...(options.now === undefined ? {} : { now: options.now }),
        });
      } catch (e) {
        throw new ModelDirError(`${dir}: tokenizer_config.json: "chat_template": ${(e as Error).message}`);
      }
      break;
    }
    default: {
      const never: never = formatName;
      throw new ModelDirError(`${dir}: unknown chat format ${String(never)}`);
    }
  }
  progress(
    `chat format: ${format.name}, stop tokens [${format.stopTokens.join(", ")}] (${
      Math.round(performance.now() - t0)
    } ms)`,
  );

  const maxModelLen = contextLength(m);
  const eosTokenIds = modelEosTokenIds(m);
  const modelId = baseName(dir);
  progress(`loaded ${modelId} in ${Math.round(performance.now() - start)} ms (max model len ${maxModelLen})`);
  return {
    dir,
    modelId,
    config: m.config,
    generationConfig: m.generationConfig,
    tokenizerConfig: m.tokenizerConfig,
    tokenizer: m.tokenizer,
    format,
    formatName,
    weights: m.weights,
    maxModelLen,
    eosTokenIds,
  };
}
