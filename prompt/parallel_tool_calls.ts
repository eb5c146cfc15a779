/**
 * How many tool calls one response may make: `parallel_tool_calls: false` allows one, `max_tool_calls` (Responses)
 * caps them at N; the lower limit wins. Harmony models stop at their first `<|call|>` already; a template
 * (ChatML-style) model may write several `<tool_call>` blocks in one turn, so there a one-call turn stops generating
 * at the format's call-closing text. Whatever the format, the parser ends the output once the last allowed call closed
 * (CallLimitParser), so a model that goes on anyway never shows more calls.
 */
import type { ChatFormat } from "./chat_format.ts";
import { CallLimitParser } from "../parsers/call_limit_parser.ts";
import type { OutputParser } from "../parsers/segment.ts";

export interface ToolCallLimit {
  /** Stop strings the generation needs on top of the request's own. */
  readonly stopStrings: readonly string[];
  /** The request's parser, limited as the settings require. */
  limit(parser: OutputParser): OutputParser;
}

const UNLIMITED: ToolCallLimit = { stopStrings: [], limit: (parser) => parser };

export function parallelToolCallLimit(
  format: ChatFormat,
  parallelToolCalls: boolean | null | undefined,
  functionTools: number,
  maxToolCalls?: number | null,
): ToolCallLimit {
  let max = maxToolCalls ?? Infinity;
  if (parallelToolCalls === false && functionTools > 0) max = Math.min(max, 1);
  if (max === Infinity) return UNLIMITED;
  return {
    stopStrings: max === 1 && format.toolCallEnd !== undefined ? [format.toolCallEnd] : [],
    limit: (parser) => new CallLimitParser(parser, max),
  };
}
