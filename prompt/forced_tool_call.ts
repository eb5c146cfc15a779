import type { ToolChoice } from "./conversation.ts";

/**
 * What a request's `tool_choice` obliges the assistant turn to begin with. rill has no constrained decoding, so a
 * format honours `required` and a named choice by ending the prompt inside the opening of a tool call (a prefill)
 * and feeding the same tokens to the output parser first: the model can then only write that call's arguments
 * (named) or a tool name and its arguments (any). `required` with a single tool is that tool, named.
 */
export type ForcedCall =
  | { readonly kind: "free" }
  | { readonly kind: "named"; readonly name: string }
  | { readonly kind: "any" };

export function forcedCall(choice: ToolChoice | undefined, toolNames: readonly string[]): ForcedCall {
  if (choice === undefined || choice === "auto" || choice === "none") return { kind: "free" };
  if (choice === "required") {
    if (toolNames.length === 0) return { kind: "free" };
    const only = toolNames.length === 1 ? toolNames[0] : undefined;
    return only === undefined ? { kind: "any" } : { kind: "named", name: only };
  }
  return { kind: "named", name: choice.name };
}
