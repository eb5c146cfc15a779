/**
 * zod schema for the legacy `POST /v1/completions`, and the prompt forms it takes: a string, a list of strings, a
 * list of token ids, or a list of token-id lists (each list element is one prompt, answered by one choice).
 *
 * Honoured: prompt, max_tokens (default 16, as OpenAI), temperature, top_p, seed, stop, stream,
 * stream_options.include_usage, n (1..MAX_CHOICES choices per prompt), best_of = 1, presence/frequency penalties,
 * logit_bias, vLLM's top_k/min_p/repetition_penalty (api/sampling_fields.ts), vLLM's `add_special_tokens` (default
 * true: a text prompt gets the tokenizer post-processor's specials, Llama 3's BOS, as vLLM encodes it). Refused with a 400 naming the
 * parameter: `echo`, `logprobs`, `suffix`, `best_of` > 1.
 */
import { z } from "zod";
import { invalidRequest, unsupportedParameter } from "../../prompt/errors.ts";
import { MAX_CHOICES, SamplingFieldShape } from "../sampling_fields.ts";

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

const TokenIds = z.array(z.number().int().min(0)).min(1);

export const CompletionSchema = z.strictObject({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.array(z.string()).min(1), TokenIds, z.array(TokenIds).min(1)]),
  max_tokens: nullish(z.number().int().min(1)),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().min(0).max(1)),
  seed: nullish(z.number().int()),
  stop: nullish(z.union([z.string(), z.array(z.string()).max(4)])),
  n: nullish(z.number().int().min(1).max(MAX_CHOICES)),
  best_of: nullish(z.number().int().min(1)),
  stream: nullish(z.boolean()),
  stream_options: nullish(z.strictObject({
    include_usage: nullish(z.boolean()),
    include_obfuscation: nullish(z.boolean()),
  })),
  echo: nullish(z.boolean()),
  logprobs: nullish(z.number().int().min(0).max(5)),
  suffix: nullish(z.string()),
  add_special_tokens: nullish(z.boolean()),
  ...SamplingFieldShape,
  user: nullish(z.string()),
});

export type CompletionBody = z.output<typeof CompletionSchema>;

/** Rejects what rill cannot honour, naming the parameter. */
export function checkCompletionSupported(body: CompletionBody): void {
  if (body.echo === true) throw unsupportedParameter("echo", "'echo' is not supported");
  if (body.logprobs != null) throw unsupportedParameter("logprobs", "'logprobs' is not supported on /v1/completions");
  if (body.suffix != null && body.suffix !== "") throw unsupportedParameter("suffix", "'suffix' is not supported");
  if (body.best_of != null && body.best_of !== 1) {
    throw unsupportedParameter("best_of", "Only best_of = 1 is supported");
  }
}

/**
 * The prompts as token ids. Strings are encoded with special-token text read as special tokens (the prompt is the
 * model's raw input); ids are checked against the vocabulary, naming the offending element.
 */
export function completionPrompts(
  prompt: CompletionBody["prompt"],
  encode: (text: string) => number[],
  vocabSize: number,
): number[][] {
  const checkIds = (ids: readonly number[], param: string): number[] => {
    const bad = ids.findIndex((id) => id >= vocabSize);
    if (bad >= 0) {
      throw invalidRequest(
        `Token id ${ids[bad]} is out of the vocabulary (size ${vocabSize})`,
        `${param}[${bad}]`,
        "invalid_value",
      );
    }
    return [...ids];
  };
  const fromText = (text: string, param: string): number[] => {
    const ids = encode(text);
    if (ids.length === 0) throw invalidRequest("The prompt is empty", param, "invalid_value");
    return ids;
  };
  if (typeof prompt === "string") return [fromText(prompt, "prompt")];
  if (prompt.every((p): p is string => typeof p === "string")) return prompt.map((p, i) => fromText(p, `prompt[${i}]`));
  if (prompt.every((p): p is number => typeof p === "number")) return [checkIds(prompt, "prompt")];
  return (prompt as number[][]).map((ids, i) => checkIds(ids, `prompt[${i}]`));
}
