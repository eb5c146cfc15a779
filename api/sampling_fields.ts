/**
 * The sampling fields Chat Completions and legacy Completions share beyond temperature/top_p: OpenAI's
 * `presence_penalty`, `frequency_penalty` and `logit_bias`, and the extras vLLM users send as top-level fields
 * (`top_k`, `min_p`, `repetition_penalty`). The zod shapes bound each value (a bad one is a 400 naming it); what zod
 * cannot know, a `logit_bias` key outside the vocabulary, is checked against the tokenizer here.
 *
 * Every optional per-sequence field of engine/sampling_fields.ts is a request field here under its snake_case name
 * (`repetitionPenalty` → `repetition_penalty`), bounded by the engine's own limits unless `API_BOUNDS` names tighter
 * ones (OpenAI's ±2 for the penalties): a field added to that description is accepted by the API with no edit here.
 */
import { z } from "zod";
import type { SamplingParams } from "../engine/engine.ts";
import {
  invalidRequestValue,
  OPTIONAL_SAMPLING_KEYS,
  type OptionalSamplingField,
  type OptionalSamplingParams,
} from "../engine/sampling_fields.ts";
import { invalidRequest } from "../prompt/errors.ts";

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

/** OpenAI bounds both penalties to [-2, 2]. */
export const Penalty = z.number().min(-2).max(2);

/** Token-id keys (decimal strings, as JSON objects need) to a bias in [-100, 100] added to the logit. */
export const LogitBias = z.record(
  z.string().regex(/^(0|[1-9][0-9]{0,9})$/, "must be a token id"),
  z.number().min(-100).max(100),
);

/** `presencePenalty` → `presence_penalty`. */
type Snake<S extends string> = S extends `${infer H}${infer T}`
  ? `${H extends Lowercase<H> ? H : `_${Lowercase<H>}`}${Snake<T>}`
  : S;

/** The request name of an optional sampling field. */
export function requestName<K extends OptionalSamplingField>(key: K): Snake<K> {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) as Snake<K>;
}

/** Request bounds tighter than the engine's limits (which every field gets). */
const API_BOUNDS: Partial<Record<OptionalSamplingField, z.ZodNumber>> = {
  presencePenalty: Penalty,
  frequencyPenalty: Penalty,
  /** vLLM: > 0; 1 is off, above 1 discourages repeats. */
  repetitionPenalty: z.number().gt(0).max(100),
};

function optionalField(key: OptionalSamplingField) {
  return nullish(
    (API_BOUNDS[key] ?? z.number()).superRefine((v, ctx) => {
      const reason = invalidRequestValue(key, v);
      if (reason !== undefined) ctx.addIssue({ code: "custom", message: reason });
    }),
  );
}

type OptionalShape = { readonly [K in OptionalSamplingField as Snake<K>]: ReturnType<typeof optionalField> };

export const SamplingFieldShape = {
  ...Object.fromEntries(OPTIONAL_SAMPLING_KEYS.map((key) => [requestName(key), optionalField(key)])) as OptionalShape,
  logit_bias: nullish(LogitBias),
  /** vLLM: -1 or 0 keep every token. */
  top_k: nullish(z.number().int().min(-1)),
};

export type SamplingFieldsBody =
  & { readonly [K in OptionalSamplingField as Snake<K>]?: number | null | undefined }
  & {
    readonly logit_bias?: Record<string, number> | null | undefined;
    readonly top_k?: number | null | undefined;
  };

type SamplingFields = Pick<SamplingParams, "topK" | OptionalSamplingField | "logitBias">;

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
  const optional: { [K in OptionalSamplingField]?: number } = {};
  for (const key of OPTIONAL_SAMPLING_KEYS) {
    const value = body[requestName(key)];
    if (value != null) optional[key] = value;
  }
  return {
    topK: body.top_k == null ? defaultTopK : Math.max(0, body.top_k),
    ...(optional as OptionalSamplingParams),
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
