/**
 * `parallel_tool_calls: false` (at most one function call per response) holds by construction for harmony models:
 * the sampler stops at the first `<|call|>`. A template (ChatML-style) model may write several `<tool_call>` blocks
 * in one turn and nothing stops it after the first, so there the setting is refused, naming the parameter, rather
 * than silently ignored.
 */
import type { ChatFormat } from "../formats/chat_format.ts";
import { unsupportedParameter } from "./errors.ts";

export function checkParallelToolCalls(
  format: ChatFormat,
  parallelToolCalls: boolean | null | undefined,
  functionTools: number,
): void {
  if (parallelToolCalls !== false || functionTools === 0 || format.name === "harmony") return;
  throw unsupportedParameter(
    "parallel_tool_calls",
    `'parallel_tool_calls: false' is not supported for ${format.name} models: they may call several tools in one turn`,
  );
}
