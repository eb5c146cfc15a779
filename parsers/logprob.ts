/**
 * A sampled token's log-probability in the wire shape OpenAI uses for Responses and Chat Completions alike. The split
 * stage builds it once per token from the engine's ids; parsers attach it to the text delta the token produced, and
 * the emitter and the Chat Completions stream send it as it is, so deltas, `*.done` events and final parts compare
 * equal.
 */
export interface TopLogprob {
  readonly token: string;
  readonly bytes: readonly number[];
  readonly logprob: number;
}

export interface Logprob {
  readonly token: string;
  readonly bytes: readonly number[];
  readonly logprob: number;
  readonly top_logprobs: readonly TopLogprob[];
}
