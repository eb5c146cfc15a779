/**
 * The sampling fields Chat Completions and legacy Completions share beyond temperature/top_p: OpenAI's
 * `presence_penalty`, `frequency_penalty` and `logit_bias`, and the extras vLLM users send as top-level fields
 * (`top_k`, `min_p`, `repetition_penalty`). The zod shapes bound each value (a bad one is a 400 naming it); what zod
 * cannot know, a `logit_bias` key outside the vocabulary, is checked against the tokenizer here.
 */
import { z } from "zod";
import type { SamplingParams } from "../engine/engine.ts";
import { invalidRequest } from "../prompt/errors.ts";

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

/** OpenAI bounds both penalties to [-2, 2]. */
export const Penalty = z.number().min(-2).max(2);

/** Token-id keys (decimal strings, as JSON objects need) to a bias in [-100, 100] added to the logit. */
export const LogitBias = z.record(
  z.string().regex(/^(0|[1-9][0-9]{0,9})$/, "must be a token id"),
  z.number().min(-100).max(100),
);

export const SamplingFieldShape = {
  presence_penalty: nullish(Penalty),
  frequency_penalty: nullish(Penalty),
  logit_bias: nullish(LogitBias),
  /** vLLM: -1 or 0 keep every token. */
  top_k: nullish(z.number().int().min(-1)),
  min_p: nullish(z.number().min(0).max(1)),
  /** vLLM: > 0; 1 is off, above 1 discourages repeats. */
  repetition_penalty: nullish(z.number().gt(0).max(100)),
};

export interface SamplingFieldsBody {
  readonly presence_penalty?: number | null | undefined;
  readonly frequency_penalty?: number | null | undefined;
  readonly logit_bias?: Record<string, number> | null | undefined;
  readonly top_k?: number | null | undefined;
  readonly min_p?: number | null | undefined;
  readonly repetition_penalty?: number | null | undefined;
}

type SamplingFields = Pick<
  SamplingParams,
  "topK" | "minP" | "presencePenalty" | "frequencyPenalty" | "repetitionPenalty" | "logitBias"
>;

/**
 * The engine's view of the fields, with `defaultTopK` (the model's generation config) for a request that sends no
 * `top_k`. A `logit_bias` id at or past `vocabSize` is a 400 naming `logit_bias`; zero biases are dropped.
 */
export function samplingFields(body: SamplingFieldsBody, defaultTopK: number, vocabSize: number): SamplingFields {
  const bias = new Map<number, number>();
  for (const [key, value] of Object.entries(body.logit_bias ?? {})) {
    const id = Number(key);
    if (id >= vocabSize) {
      throw invalidRequest(
        `Invalid 'logit_bias': token id ${key} is out of the vocabulary (size ${vocabSize})`,
        "logit_bias",
        "invalid_value",
      );
    }
    if (value !== 0) bias.set(id, value);
  }
  const topK = body.top_k == null ? defaultTopK : Math.max(0, body.top_k);
  return {
    topK,
    ...(body.min_p == null ? {} : { minP: body.min_p }),
    ...(body.presence_penalty == null ? {} : { presencePenalty: body.presence_penalty }),
    ...(body.frequency_penalty == null ? {} : { frequencyPenalty: body.frequency_penalty }),
    ...(body.repetition_penalty == null ? {} : { repetitionPenalty: body.repetition_penalty }),
    ...(bias.size === 0 ? {} : { logitBias: bias }),
  };
}

/** Most choices one request may ask for (`n`). */
export const MAX_CHOICES = 16;

/**
 * The seed of choice `index` of a request seeded with `seed`: choice 0 keeps the request's seed (so `n: 1` samples
 * exactly as before), the others get a SplitMix64 mix of (seed, index) cut to a safe integer, so the same request
 * always yields the same choices while no two choices share a stream of draws.
 */
export function choiceSeed(seed: number, index: number): number {
  if (index === 0) return seed;
  let z = BigInt.asUintN(64, BigInt(Math.trunc(seed)) + 0x9e3779b97f4a7c15n * BigInt(index));
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
  z ^= z >> 31n;
  return Number(z & 0x1fffffffffffffn);
}
