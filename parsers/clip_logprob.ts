/**
 * A logprob cut to the part of its token's text that an item shows, so that the logprob tokens of a text always
 * concatenate to it: parsers trim text (whitespace at edges, markup sharing a token with text, a header word before a
 * recovered body) and trim the logprob the same way. `logprob` and `top_logprobs` stay the sampled token's.
 */
import type { Logprob } from "./logprob.ts";

const utf8 = new TextEncoder();

/**
 * `logprob` with `lead` characters cut from the front of its token and `trail` from the back, when those characters
 * are the token's decoded text there (a test or odd vocabulary whose token strings are not the text is left alone).
 */
export function clipLogprob(logprob: Logprob, text: string, lead: number, trail: number): Logprob {
  if (lead <= 0 && trail <= 0) return logprob;
  const head = lead > 0 ? text.slice(0, lead) : "";
  const tail = trail > 0 ? text.slice(Math.max(lead, text.length - trail)) : "";
  const token = logprob.token;
  if (!token.startsWith(head) || !token.endsWith(tail) || head.length + tail.length >= token.length) return logprob;
  const headBytes = utf8.encode(head).length;
  const tailBytes = utf8.encode(tail).length;
  return {
    ...logprob,
    token: token.slice(head.length, token.length - tail.length),
    bytes: logprob.bytes.slice(headBytes, logprob.bytes.length - tailBytes),
  };
}
