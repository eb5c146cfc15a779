/**
 * Wire types of the Responses API as rill emits them: the Response object, its output items and content parts,
 * usage, and every stream event. Field sets follow the OpenAPI `required` lists (responses-streaming.md §1.2–§2.4).
 *
 * Events come in two forms. `UnsequencedEvent` is what builders and the emitter produce; it has no
 * `sequence_number`. `ResponseStreamEvent` carries one plus a type-level brand that only events/sequencer_stage.ts can
 * apply, so no other code can number an event (vLLM numbered per builder and leaked −1 into nested objects).
 */
import type { Logprob } from "../parsers/logprob.ts";

export type { Logprob, TopLogprob } from "../parsers/logprob.ts";

export type ResponseStatus = "completed" | "failed" | "in_progress" | "cancelled" | "queued" | "incomplete";
export type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface Usage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface OutputTextPart {
  readonly type: "output_text";
  readonly text: string;
  readonly annotations: readonly unknown[];
  readonly logprobs: readonly Logprob[];
}
export interface RefusalPart {
  readonly type: "refusal";
  readonly refusal: string;
}
export interface ReasoningTextPart {
  readonly type: "reasoning_text";
  readonly text: string;
}
export type ContentPart = OutputTextPart | RefusalPart | ReasoningTextPart;

export interface MessageItem {
  readonly id: string;
  readonly type: "message";
  readonly role: "assistant";
  readonly status: ItemStatus;
  readonly content: readonly (OutputTextPart | RefusalPart)[];
  readonly phase?: "commentary" | "final_answer";
}
export interface ReasoningItem {
  readonly id: string;
  readonly type: "reasoning";
  readonly status: ItemStatus;
  readonly summary: readonly { readonly type: "summary_text"; readonly text: string }[];
  readonly content: readonly ReasoningTextPart[];
  /** The text sealed by the server (include `reasoning.encrypted_content`); clients send it back as is. */
  readonly encrypted_content?: string;
}
export interface FunctionCallItem {
  readonly id: string;
  readonly type: "function_call";
  readonly status: ItemStatus;
  readonly call_id: string;
  readonly name: string;
  readonly arguments: string;
}
export type WebSearchAction =
  | { readonly type: "search"; readonly query?: string }
  | { readonly type: "open_page"; readonly url?: string }
  | { readonly type: "find"; readonly pattern?: string; readonly url?: string };
export interface WebSearchCallItem {
  readonly id: string;
  readonly type: "web_search_call";
  readonly status: "in_progress" | "searching" | "completed" | "failed";
  readonly action: WebSearchAction;
}
export interface CodeInterpreterCallItem {
  readonly id: string;
  readonly type: "code_interpreter_call";
  readonly status: ItemStatus | "interpreting" | "failed";
  readonly container_id: string;
  readonly code: string;
  readonly outputs: null;
}
export interface McpCallItem {
  readonly id: string;
  readonly type: "mcp_call";
  readonly status: ItemStatus | "calling" | "failed";
  readonly server_label: string;
  readonly name: string;
  readonly arguments: string;
}
export type OutputItem =
  | MessageItem
  | ReasoningItem
  | FunctionCallItem
  | WebSearchCallItem
  | CodeInterpreterCallItem
  | McpCallItem;
export type OutputItemType = OutputItem["type"];

export interface ResponseError {
  readonly code: string;
  readonly message: string;
}

/** The Response object (§2.4). Every OAS-required key is always present; nullable ones as `null`. */
export interface Response {
  readonly id: string;
  readonly object: "response";
  readonly created_at: number;
  readonly status: ResponseStatus;
  readonly completed_at: number | null;
  readonly error: ResponseError | null;
  readonly incomplete_details: { readonly reason: "max_output_tokens" | "content_filter" } | null;
  readonly instructions: string | null;
  readonly model: string;
  readonly output: readonly OutputItem[];
  readonly parallel_tool_calls: boolean;
  readonly tool_choice: unknown;
  readonly tools: readonly unknown[];
  readonly temperature: number | null;
  readonly top_p: number | null;
  readonly top_logprobs: number;
  readonly presence_penalty: number;
  readonly frequency_penalty: number;
  readonly max_tool_calls: number | null;
  readonly max_output_tokens: number | null;
  readonly previous_response_id: string | null;
  readonly conversation?: { readonly id: string } | null;
  readonly reasoning: unknown;
  readonly text: unknown;
  readonly truncation: "auto" | "disabled";
  readonly metadata: Readonly<Record<string, string>>;
  readonly user: string | null;
  readonly safety_identifier: string | null;
  readonly prompt_cache_key: string | null;
  readonly store: boolean;
  readonly background: boolean;
  readonly service_tier: string;
  readonly usage: Usage | null;
}

type ItemScoped = { readonly item_id: string; readonly output_index: number };
type PartScoped = ItemScoped & { readonly content_index: number };

/** Every event rill emits, without its sequence number. */
export type UnsequencedEvent =
  | { readonly type: "response.created"; readonly response: Response }
  | { readonly type: "response.queued"; readonly response: Response }
  | { readonly type: "response.in_progress"; readonly response: Response }
  | { readonly type: "response.completed"; readonly response: Response }
  | { readonly type: "response.incomplete"; readonly response: Response }
  | { readonly type: "response.failed"; readonly response: Response }
  | { readonly type: "error"; readonly code: string | null; readonly message: string; readonly param: string | null }
  | { readonly type: "response.output_item.added"; readonly output_index: number; readonly item: OutputItem }
  | { readonly type: "response.output_item.done"; readonly output_index: number; readonly item: OutputItem }
  | PartScoped & { readonly type: "response.content_part.added"; readonly part: ContentPart }
  | PartScoped & { readonly type: "response.content_part.done"; readonly part: ContentPart }
  | PartScoped & {
    readonly type: "response.output_text.delta";
    readonly delta: string;
    readonly logprobs: readonly Logprob[];
  }
  | PartScoped & {
    readonly type: "response.output_text.done";
    readonly text: string;
    readonly logprobs: readonly Logprob[];
  }
  | PartScoped & { readonly type: "response.reasoning_text.delta"; readonly delta: string }
  | PartScoped & { readonly type: "response.reasoning_text.done"; readonly text: string }
  | ItemScoped & { readonly type: "response.function_call_arguments.delta"; readonly delta: string }
  | ItemScoped & {
    readonly type: "response.function_call_arguments.done";
    readonly arguments: string;
    readonly name: string;
  }
  | ItemScoped & { readonly type: "response.web_search_call.in_progress" }
  | ItemScoped & { readonly type: "response.web_search_call.searching" }
  | ItemScoped & { readonly type: "response.web_search_call.completed" }
  | ItemScoped & { readonly type: "response.code_interpreter_call.in_progress" }
  | ItemScoped & { readonly type: "response.code_interpreter_call_code.delta"; readonly delta: string }
  | ItemScoped & { readonly type: "response.code_interpreter_call_code.done"; readonly code: string }
  | ItemScoped & { readonly type: "response.code_interpreter_call.interpreting" }
  | ItemScoped & { readonly type: "response.code_interpreter_call.completed" }
  | ItemScoped & { readonly type: "response.mcp_call.in_progress" }
  | ItemScoped & { readonly type: "response.mcp_call_arguments.delta"; readonly delta: string }
  | ItemScoped & { readonly type: "response.mcp_call_arguments.done"; readonly arguments: string }
  | ItemScoped & { readonly type: "response.mcp_call.completed" }
  | ItemScoped & { readonly type: "response.mcp_call.failed" };

export type EventType = UnsequencedEvent["type"];

/** Type-level only: never present at run time, so it cannot leak into JSON. */
declare const sequencedBrand: unique symbol;

/** A numbered event, as sent on the wire. Only `Sequencer` produces these. */
export type ResponseStreamEvent = UnsequencedEvent extends infer E
  ? E extends UnsequencedEvent ? E & { readonly sequence_number: number; readonly [sequencedBrand]: true } : never
  : never;

/** The lifecycle events, whose payload is a whole Response. */
export type LifecycleEventType =
  | "response.created"
  | "response.queued"
  | "response.in_progress"
  | "response.completed"
  | "response.incomplete"
  | "response.failed";

export type TerminalEventType = "response.completed" | "response.incomplete" | "response.failed";
