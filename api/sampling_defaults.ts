/**
 * The served model's default sampling, from its generation_config.json. Hugging Face's `do_sample: false` means
 * greedy decoding whatever `temperature` says, so it becomes temperature 0 (the sampler's argmax); otherwise the
 * file's temperature/top_p/top_k apply, and what it leaves out takes the OpenAI defaults (temperature 1, top_p 1)
 * and no top-k cut.
 */
import { type GenerationConfig, ModelDirError } from "../checkpoint/model_dir.ts";

/** Sampling a request gets for the fields it leaves out. */
export interface SamplingDefaults {
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
}

export const OPENAI_DEFAULTS: SamplingDefaults = { temperature: 1, topP: 1, topK: 0 };

/**
 * The top_p handed to the engine for a request's `top_p`. OpenAI accepts 0 and means "only the most likely token",
 * but the sampler treats topP <= 0 as "no nucleus cut" (it filters only for 0 < topP < 1), so 0 would sample from the
 * whole distribution. The smallest positive double keeps exactly the top token: its mass alone reaches the cut.
 * The response still echoes the 0 the client sent.
 */
export function samplerTopP(topP: number): number {
  return topP === 0 ? Number.MIN_VALUE : topP;
}

export function samplingDefaults(
  config: GenerationConfig | undefined,
  doSample: boolean | undefined,
): SamplingDefaults {
  if (doSample === false) return { temperature: 0, topP: 1, topK: 0 };
  return {
    temperature: config?.temperature ?? OPENAI_DEFAULTS.temperature,
    topP: config?.topP ?? OPENAI_DEFAULTS.topP,
    topK: config?.topK ?? OPENAI_DEFAULTS.topK,
  };
}

/**
 * `do_sample` of `dir/generation_config.json` (undefined when the file or the field is absent). The engine's parsed
 * GenerationConfig does not carry it, so the file is read here. A non-boolean value is an error naming the field.
 */
export async function readDoSample(dir: string): Promise<boolean | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(`${dir}/generation_config.json`);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
  const json: unknown = JSON.parse(text);
  const value = typeof json === "object" && json !== null ? (json as Record<string, unknown>).do_sample : undefined;
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") {
    throw new ModelDirError(`${dir}: generation_config.json: "do_sample" must be true or false`);
  }
  return value;
}
