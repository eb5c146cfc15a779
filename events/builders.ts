/**
 * Leaf builders: one pure function per wire event, named after it. They take plain values and return a fresh
 * unsequenced event; they hold no state, mutate nothing and know nothing about parsers or models. Which event comes
 * when is decided only by the emitter.
 */
import type { ContentPart, Logprob, OutputItem, Response, ResponseError, UnsequencedEvent } from "./types.ts";

/** Where an item sits in the response. */
export interface ItemRef {
  readonly itemId: string;
  readonly outputIndex: number;
}
/** Where a content part sits in its item. */
export interface PartRef extends ItemRef {
  readonly contentIndex: number;
}

type Of<T extends UnsequencedEvent["type"]> = Extract<UnsequencedEvent, { type: T }>;

export const responseCreated = (response: Response): Of<"response.created"> => ({ type: "response.created", response });
export const responseQueued = (response: Response): Of<"response.queued"> => ({ type: "response.queued", response });
export const responseInProgress = (response: Response): Of<"response.in_progress"> => ({
  type: "response.in_progress",
  response,
});
export const responseCompleted = (response: Response): Of<"response.completed"> => ({
  type: "response.completed",
  response,
});
export const responseIncomplete = (response: Response): Of<"response.incomplete"> => ({
  type: "response.incomplete",
  response,
});
export const responseFailed = (response: Response): Of<"response.failed"> => ({ type: "response.failed", response });

/** The flat OAS error event. Its top-level `error`-free shape matters: the SDK throws on any top-level `error` key. */
export const error = (e: ResponseError, param: string | null = null): Of<"error"> => ({
  type: "error",
  code: e.code,
  message: e.message,
  param,
});

export const outputItemAdded = (outputIndex: number, item: OutputItem): Of<"response.output_item.added"> => ({
  type: "response.output_item.added",
  output_index: outputIndex,
  item,
});
export const outputItemDone = (outputIndex: number, item: OutputItem): Of<"response.output_item.done"> => ({
  type: "response.output_item.done",
  output_index: outputIndex,
  item,
});

export const contentPartAdded = (ref: PartRef, part: ContentPart): Of<"response.content_part.added"> => ({
  type: "response.content_part.added",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  content_index: ref.contentIndex,
  part,
});
export const contentPartDone = (ref: PartRef, part: ContentPart): Of<"response.content_part.done"> => ({
  type: "response.content_part.done",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  content_index: ref.contentIndex,
  part,
});

export const outputTextDelta = (
  ref: PartRef,
  delta: string,
  logprobs: readonly Logprob[],
): Of<"response.output_text.delta"> => ({
  type: "response.output_text.delta",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  content_index: ref.contentIndex,
  delta,
  logprobs,
});
export const outputTextDone = (
  ref: PartRef,
  text: string,
  logprobs: readonly Logprob[],
): Of<"response.output_text.done"> => ({
  type: "response.output_text.done",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  content_index: ref.contentIndex,
  text,
  logprobs,
});

export const reasoningTextDelta = (ref: PartRef, delta: string): Of<"response.reasoning_text.delta"> => ({
  type: "response.reasoning_text.delta",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  content_index: ref.contentIndex,
  delta,
});
export const reasoningTextDone = (ref: PartRef, text: string): Of<"response.reasoning_text.done"> => ({
  type: "response.reasoning_text.done",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  content_index: ref.contentIndex,
  text,
});

export const functionCallArgumentsDelta = (
  ref: ItemRef,
  delta: string,
): Of<"response.function_call_arguments.delta"> => ({
  type: "response.function_call_arguments.delta",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  delta,
});
export const functionCallArgumentsDone = (
  ref: ItemRef,
  args: string,
  name: string,
): Of<"response.function_call_arguments.done"> => ({
  type: "response.function_call_arguments.done",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  arguments: args,
  name,
});

type StatusEventType =
  | "response.web_search_call.in_progress"
  | "response.web_search_call.searching"
  | "response.web_search_call.completed"
  | "response.code_interpreter_call.in_progress"
  | "response.code_interpreter_call.interpreting"
  | "response.code_interpreter_call.completed"
  | "response.mcp_call.in_progress"
  | "response.mcp_call.completed"
  | "response.mcp_call.failed";

const statusEvent = <T extends StatusEventType>(type: T) => (ref: ItemRef): Of<T> =>
  ({ type, item_id: ref.itemId, output_index: ref.outputIndex }) as Of<T>;

export const webSearchCallInProgress = statusEvent("response.web_search_call.in_progress");
export const webSearchCallSearching = statusEvent("response.web_search_call.searching");
export const webSearchCallCompleted = statusEvent("response.web_search_call.completed");
export const codeInterpreterCallInProgress = statusEvent("response.code_interpreter_call.in_progress");
export const codeInterpreterCallInterpreting = statusEvent("response.code_interpreter_call.interpreting");
export const codeInterpreterCallCompleted = statusEvent("response.code_interpreter_call.completed");
export const mcpCallInProgress = statusEvent("response.mcp_call.in_progress");
export const mcpCallCompleted = statusEvent("response.mcp_call.completed");
export const mcpCallFailed = statusEvent("response.mcp_call.failed");

export const codeInterpreterCallCodeDelta = (
  ref: ItemRef,
  delta: string,
): Of<"response.code_interpreter_call_code.delta"> => ({
  type: "response.code_interpreter_call_code.delta",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  delta,
});
export const codeInterpreterCallCodeDone = (
  ref: ItemRef,
  code: string,
): Of<"response.code_interpreter_call_code.done"> => ({
  type: "response.code_interpreter_call_code.done",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  code,
});

export const mcpCallArgumentsDelta = (ref: ItemRef, delta: string): Of<"response.mcp_call_arguments.delta"> => ({
  type: "response.mcp_call_arguments.delta",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  delta,
});
export const mcpCallArgumentsDone = (ref: ItemRef, args: string): Of<"response.mcp_call_arguments.done"> => ({
  type: "response.mcp_call_arguments.done",
  item_id: ref.itemId,
  output_index: ref.outputIndex,
  arguments: args,
});
