/**
 * A model-neutral conversation: what the HTTP layer builds from Responses / Chat Completions input, and what a
 * chat format renders into prompt tokens. Nothing here knows about harmony, ChatML or the wire format.
 */

export interface FunctionTool {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of the arguments object. */
  readonly parameters?: Record<string, unknown>;
  readonly strict?: boolean;
}

export interface ToolCall {
  readonly callId: string;
  readonly name: string;
  /** JSON text exactly as the model produced it. */
  readonly arguments: string;
}

export type ConversationMessage =
  | { readonly role: "system" | "developer" | "user"; readonly content: string }
  | {
    readonly role: "assistant";
    /** Visible answer text (empty string when the turn only called tools). */
    readonly content: string;
    /** Chain of thought from an earlier turn; formats decide whether to render it. */
    readonly reasoning?: string;
    readonly toolCalls?: readonly ToolCall[];
  }
  | { readonly role: "tool"; readonly callId: string; readonly name?: string; readonly content: string };

export type ToolChoice = "auto" | "none" | "required" | { readonly type: "function"; readonly name: string };

export interface PromptInput {
  /** System/developer instructions for this turn (Responses `instructions`). */
  readonly instructions?: string;
  readonly messages: readonly ConversationMessage[];
  readonly tools: readonly FunctionTool[];
  readonly toolChoice: ToolChoice;
  readonly reasoningEffort?: "low" | "medium" | "high";
}
