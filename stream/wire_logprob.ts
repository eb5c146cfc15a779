import type { SegmentLogprob } from "../parsers/segment.ts";
import type { Logprob } from "./types.ts";

/**
 * A parser's per-token logprob in the wire shape OpenAI uses for both Responses and Chat Completions. The top
 * entries are copied field by field so nothing a parser attaches beyond the three wire fields reaches a client.
 */
export function wireLogprob(l: SegmentLogprob): Logprob {
  return {
    token: l.token,
    bytes: l.bytes,
    logprob: l.logprob,
    top_logprobs: l.top.map((t) => ({ token: t.token, bytes: t.bytes, logprob: t.logprob })),
  };
}
