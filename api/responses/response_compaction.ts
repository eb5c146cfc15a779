/**
 * `POST /v1/responses/compact`: the model writes a summary of the conversation (input, or the chain of
 * `previous_response_id`), and the answer is the compacted list OpenAI's compact endpoint returns: every user
 * message of the conversation, in order, then one `compaction` item whose `encrypted_content` seals the summary
 * (reasoning_seal.ts). Sent back as `input`, that list renders the summary as a user message after the kept user
 * messages (conversation_items.ts), in place of everything else the conversation held.
 *
 * The summary is generated like a non-streamed response to the conversation plus a request to summarise it; the
 * conversation is truncated from its oldest messages when it does not fit (it is compacted because it is long).
 */
import { z } from "zod";
import { invalidRequest, serverError, unsupportedParameter } from "../../prompt/errors.ts";
import { parseOrThrow } from "../validation.ts";
import type { CreateResponseBody, InputItem } from "./responses_schema.ts";

/** The request of the compact endpoint (openai-node `ResponseCompactParams`). */
export const CompactSchema = z.strictObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.unknown())]).nullable().optional(),
  instructions: z.string().nullable().optional(),
  previous_response_id: z.string().min(1).nullable().optional(),
  prompt_cache_key: z.string().nullable().optional(),
  prompt_cache_retention: z.enum(["in_memory", "24h"]).nullable().optional(),
  prompt_cache_options: z.unknown().optional(),
  service_tier: z.enum(["auto", "default", "fast", "flex", "priority"]).nullable().optional(),
  image: z.unknown().optional(),
});

/** Most tokens a summary may take. */
export const SUMMARY_MAX_TOKENS = 4096;

export const SUMMARY_REQUEST = "Write a summary of this conversation so far, to continue it from the summary alone: " +
  "the user's goals and constraints, what was done and found (tool calls and their results included), decisions " +
  "made, and what remains open. Reply with the summary only.";

/** The compact body as a non-streamed, unstored create request whose last input item asks for the summary. */
export function summaryRequest(raw: Record<string, unknown>): CreateResponseBody {
  const body = parseOrThrow(CompactSchema, raw);
  if (body.prompt_cache_retention === "24h") {
    throw unsupportedParameter("prompt_cache_retention", "rill keeps its prefix cache in memory only");
  }
  if (body.input == null && body.previous_response_id == null) {
    throw invalidRequest(
      "Missing required parameter: 'input' (or 'previous_response_id')",
      "input",
      "missing_required_parameter",
    );
  }
  const ask = { type: "message", role: "user", content: SUMMARY_REQUEST };
  const input = typeof body.input === "string"
    ? [{ type: "message", role: "user", content: body.input }, ask]
    : [...(body.input ?? []), ask];
  return {
    model: body.model,
    input,
    store: false,
    stream: false,
    truncation: "auto",
    max_output_tokens: SUMMARY_MAX_TOKENS,
    ...(body.instructions == null ? {} : { instructions: body.instructions }),
    ...(body.previous_response_id == null ? {} : { previous_response_id: body.previous_response_id }),
    ...(body.prompt_cache_key == null ? {} : { prompt_cache_key: body.prompt_cache_key }),
  };
}

/** The summary in a generated output: its answer text, else (a model that only reasoned) its reasoning. */
export function summaryText(response: { status: string; output: readonly unknown[] }): string {
  if (response.status === "failed") throw serverError("The model failed while writing the summary");
  let answer = "";
  let reasoning = "";
  for (const raw of response.output) {
    const item = raw as { type?: string; content?: readonly { type?: string; text?: string }[] };
    for (const part of item.content ?? []) {
      if (item.type === "message" && part.type === "output_text") answer += part.text ?? "";
      if (item.type === "reasoning" && part.type === "reasoning_text") reasoning += part.text ?? "";
    }
  }
  return (answer.trim() !== "" ? answer : reasoning).trim();
}

/** The user messages the compacted list keeps, in wire form; `items` ends with the summary request, left out. */
export function keptUserMessages(
  items: readonly InputItem[],
  newId: () => string,
): Record<string, unknown>[] {
  const kept: Record<string, unknown>[] = [];
  for (const item of items.slice(0, -1)) {
    if (item.type !== "message" || item.role !== "user") continue;
    kept.push({ id: item.id ?? newId(), type: "message", role: "user", status: "completed", content: item.content });
  }
  return kept;
}
