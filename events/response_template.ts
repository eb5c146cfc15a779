/**
 * What a Response echoes from its request, fixed for the whole response, and the one function that turns it plus
 * the per-moment state (status, output, usage…) into a wire Response. Every lifecycle event's payload comes from
 * `buildResponse`, so all of them carry the same id, created_at, model and every OAS-required key.
 */
import type { OutputItem, Response, ResponseError, ResponseStatus, Usage } from "./types.ts";

export interface ResponseTemplate {
  /** "resp_…" */
  readonly id: string;
  /** Unix seconds. */
  readonly createdAt: number;
  readonly model: string;
  readonly instructions: string | null;
  /** As sent by the client (already validated). */
  readonly tools: readonly unknown[];
  /** Wire value: "auto" | "none" | "required" | {type:"function", name}. */
  readonly toolChoice: unknown;
  readonly parallelToolCalls: boolean;
  readonly temperature: number | null;
  readonly topP: number | null;
  readonly maxOutputTokens: number | null;
  readonly metadata: Readonly<Record<string, string>>;
  readonly previousResponseId: string | null;
  /** The Conversations API conversation the response belongs to; the key is absent when there is none. */
  readonly conversation?: { readonly id: string };
  readonly store: boolean;
  readonly background: boolean;
  /** E.g. {format:{type:"text"}}. */
  readonly text: unknown;
  /** E.g. {effort:null, summary:null}. */
  readonly reasoning: unknown;
  readonly truncation: "auto" | "disabled";
  readonly user: string | null;
  /** Alternatives per token asked for (0 when none were). */
  readonly topLogprobs: number;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  readonly maxToolCalls: number | null;
  readonly safetyIdentifier: string | null;
  readonly promptCacheKey: string | null;
  /** The effective tier, e.g. "default". */
  readonly serviceTier: string;
}

export interface ResponseState {
  readonly status: ResponseStatus;
  readonly output: readonly OutputItem[];
  readonly usage: Usage | null;
  readonly error?: ResponseError;
  readonly incompleteReason?: "max_output_tokens" | "content_filter";
  /** Unix seconds; only kept when status is "completed". */
  readonly completedAt?: number;
}

export function buildResponse(t: ResponseTemplate, s: ResponseState): Response {
  return {
    id: t.id,
    object: "response",
    created_at: t.createdAt,
    status: s.status,
    completed_at: s.status === "completed" ? s.completedAt ?? t.createdAt : null,
    error: s.error ?? null,
    incomplete_details: s.incompleteReason === undefined ? null : { reason: s.incompleteReason },
    instructions: t.instructions,
    model: t.model,
    output: s.output,
    parallel_tool_calls: t.parallelToolCalls,
    tool_choice: t.toolChoice,
    tools: t.tools,
    temperature: t.temperature,
    top_p: t.topP,
    top_logprobs: t.topLogprobs,
    presence_penalty: t.presencePenalty,
    frequency_penalty: t.frequencyPenalty,
    max_tool_calls: t.maxToolCalls,
    max_output_tokens: t.maxOutputTokens,
    previous_response_id: t.previousResponseId,
    ...(t.conversation === undefined ? {} : { conversation: t.conversation }),
    reasoning: t.reasoning,
    text: t.text,
    truncation: t.truncation,
    metadata: t.metadata,
    user: t.user,
    safety_identifier: t.safetyIdentifier,
    prompt_cache_key: t.promptCacheKey,
    store: t.store,
    background: t.background,
    service_tier: t.serviceTier,
    usage: s.usage,
  };
}
