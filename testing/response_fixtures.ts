/** Shared test values for the events tests: a fixed response template and chunk helpers. */
import type { ParsedChunk } from "../events/parsed_chunk.ts";
import type { ResponseTemplate } from "../events/response_template.ts";
import type { Usage } from "../events/types.ts";
import type { Segment } from "../parsers/segment.ts";

export const template: ResponseTemplate = {
  id: "resp_test",
  createdAt: 1_700_000_000,
  model: "rill-test",
  instructions: null,
  tools: [],
  toolChoice: "auto",
  parallelToolCalls: true,
  temperature: 1,
  topP: 1,
  maxOutputTokens: null,
  metadata: {},
  previousResponseId: null,
  store: true,
  background: false,
  text: { format: { type: "text" } },
  reasoning: { effort: null, summary: null },
  truncation: "disabled",
  user: null,
  topLogprobs: 0,
  presencePenalty: 0,
  frequencyPenalty: 0,
  maxToolCalls: null,
  safetyIdentifier: null,
  promptCacheKey: null,
  serviceTier: "default",
};

export const clock = (): number => 1_700_000_005;

export function usage(input: number, output: number, reasoning = 0): Usage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

export const segs = (...segments: Segment[]): ParsedChunk => ({ type: "segments", segments });
export const finish = (reason: "stop" | "length" | "error" | "abort", message?: string): ParsedChunk =>
  message === undefined
    ? { type: "finish", reason, usage: usage(3, 7) }
    : { type: "finish", reason, usage: usage(3, 7), message };

/** The tools a request would send for the test parsers' tool names (function get_weather) and hosted tools. */
export const toolTemplate: ResponseTemplate = {
  ...template,
  tools: [
    { type: "function", name: "get_weather", parameters: { type: "object" }, strict: false },
    { type: "function", name: "lookup_weather", parameters: { type: "object" }, strict: false },
    { type: "web_search_preview" },
    { type: "code_interpreter", container: { type: "auto" } },
    { type: "mcp", server_label: "repo", server_url: "http://mcp.test" },
  ],
};
