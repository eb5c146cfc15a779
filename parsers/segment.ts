/**
 * The contract between output parsers and the event emitter.
 *
 * A parser turns the model's tokens into a flat list of segments: an item opens, receives text deltas, and closes.
 * Items never nest and never interleave; an `open` while an item is open is a parser bug (the emitter closes the
 * previous item defensively, but parsers must emit `close` first). Segments carry decoded text only, never raw
 * tokens, so the emitter does not know which model produced them.
 */
import type { Logprob } from "./logprob.ts";

/** What kind of output item a segment run becomes. */
export type ItemKind =
  /** Visible assistant text. `phase: "commentary"` marks a harmony preamble. */
  | { readonly type: "message"; readonly phase?: "commentary" | "final_answer" }
  | { readonly type: "reasoning" }
  /** Deltas are the JSON arguments text. `callId` is set when the model supplied one. */
  | { readonly type: "function_call"; readonly name: string; readonly callId?: string }
  /** Deltas are ignored for display but kept as the action's raw arguments. */
  | { readonly type: "web_search_call"; readonly action: string }
  /** Deltas are the code. */
  | { readonly type: "code_interpreter_call" }
  /** Deltas are the JSON arguments text. */
  | { readonly type: "mcp_call"; readonly serverLabel: string; readonly name: string };

/** Why an item ended, as the model (or the end of generation) said it. */
export type CloseReason =
  /** harmony `<|end|>` / a closing marker. */
  | "end"
  /** harmony `<|call|>`: the item is a tool call awaiting its result. */
  | "call"
  /** harmony `<|return|>`: the final answer is done. */
  | "return"
  /** Generation ended while the item was open (EOS, stop, or a new message started without a terminator). */
  | "implicit";

export type Segment =
  | { readonly kind: "open"; readonly item: ItemKind }
  | { readonly kind: "delta"; readonly text: string; readonly logprobs?: readonly Logprob[] }
  | { readonly kind: "close"; readonly reason: CloseReason };

/**
 * A stateful, synchronous output parser. `push` takes exactly one token; `flush` ends the generation and closes
 * whatever is open. Neither ever throws on malformed model output: it degrades to text.
 */
export interface OutputParser {
  push(token: number, logprob?: Logprob): Segment[];
  flush(): Segment[];
  /** True while the parser is inside a reasoning item (used to count reasoning tokens). */
  readonly inReasoning: boolean;
}
