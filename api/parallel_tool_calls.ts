/**
 * `parallel_tool_calls: false` (at most one function call per response). Harmony models stop at their first `<|call|>`
 * already; a template (ChatML-style) model may write several `<tool_call>` blocks in one turn, so there the turn is
 * ended after the first complete call: generation stops at the format's call-closing text, and the parser drops
 * anything after the first call (CallLimitParser) in case the model went on anyway.
 */
import type { ChatFormat } from "../formats/chat_format.ts";
import { CallLimitParser } from "../parsers/call_limit_parser.ts";
import type { OutputParser } from "../parsers/segment.ts";

export interface ToolCallLimit {
  /** Stop strings the generation needs on top of the request's own. */
  readonly stopStrings: readonly string[];
  /** The request's parser, limited as the setting requires. */
  limit(parser: OutputParser): OutputParser;
}

const UNLIMITED: ToolCallLimit = { stopStrings: [], limit: (parser) => parser };

export function parallelToolCallLimit(
  format: ChatFormat,
  parallelToolCalls: boolean | null | undefined,
  functionTools: number,
): ToolCallLimit {
  if (parallelToolCalls !== false || functionTools === 0) return UNLIMITED;
  return {
    stopStrings: format.toolCallEnd === undefined ? [] : [format.toolCallEnd],
    limit: (parser) => new CallLimitParser(parser, 1),
  };
}
