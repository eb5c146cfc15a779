/**
 * The engine contract shared by every backend and by the HTTP layer.
 *
 * A generation is a `ReadableStream<EngineChunk>`: zero or more `step` chunks (each one engine step for this
 * sequence, which may carry several tokens when speculation accepts drafts) and exactly one final `finish` chunk.
 * Consumers must never assume one token per chunk.
 */
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import type { OptionalSamplingParams } from "./sampling_fields.ts";
import type { TokenConstraint } from "./token_constraint.ts";

export type FinishReason =
  /** A stop token or stop string ended the sequence (also: EOS). */
  | "stop"
  /** `max_output_tokens` or the model's context length was reached. */
  | "length"
  /** The request was cancelled or its client went away. */
  | "abort"
  /** The backend failed for this sequence. */
  | "error";

/** Log-probability of one sampled token, plus the most likely alternatives when asked for. */
export interface TokenLogprob {
  readonly logprob: number;
  /** Sorted by descending logprob; empty unless `topLogprobs > 0` was requested. */
  readonly top: readonly { readonly id: number; readonly logprob: number }[];
}

export type EngineChunk =
  | {
    readonly type: "step";
    /** Tokens produced for this sequence in one engine step, in order (1..K+1 with speculation). */
    readonly tokens: readonly number[];
    /** Present iff logprobs were requested; same length as `tokens`. */
    readonly logprobs?: readonly TokenLogprob[];
  }
  | {
    readonly type: "finish";
    readonly reason: FinishReason;
    readonly promptTokens: number;
    readonly outputTokens: number;
    /** Prompt tokens served from a prefix cache, if the backend has one. */
    readonly cachedTokens?: number;
    /** Human-readable cause when `reason` is "error". */
    readonly message?: string;
  };

/**
 * A request's sampling. The optional per-sequence fields (min-p and the penalties, engine/sampling_fields.ts) take
 * their neutral value ("off") when absent.
 */
export interface SamplingParams extends OptionalSamplingParams {
  /** 0 means greedy. */
  readonly temperature: number;
  readonly topP: number;
  /** 0 means disabled. */
  readonly topK: number;
  readonly seed?: number;
  readonly maxTokens: number;
  /** Token ids that end the sequence; the stop token itself is reported in the step that produced it. */
  readonly stopTokens: readonly number[];
  /** Strings that end the sequence (checked on decoded text). */
  readonly stopStrings: readonly string[];
  /** Number of alternatives per token; -1 means no logprobs at all, 0 means sampled-token logprob only. */
  readonly logprobs: number;
  /** Token id → bias added to its logit before sampling (with the penalties); ids are in the vocabulary. */
  readonly logitBias?: ReadonlyMap<number, number>;
}

export interface GenerateRequest {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly sampling: SamplingParams;
  /** Aborting ends the generation at the next step with a `finish` of reason "abort" and frees its cache. */
  readonly signal?: AbortSignal;
  /**
   * Grammar state of a structured output: every sampled token (and every accepted draft) is one the constraint
   * allows, and each accepted token advances it. Owned by the caller, who releases it after the stream ends.
   */
  readonly constraint?: TokenConstraint;
  /**
   * A later part of a request the server already admitted (choice i > 0 of `n`): it is queued even when the waiting
   * queue is at its bound, so a request that started is never half refused. A request adds at most `n - 1` such.
   */
  readonly admitted?: boolean;
}

export interface EngineStats {
  readonly running: number;
  readonly waiting: number;
  /** Fraction 0..1 of the KV cache in use (blocks held by sequences / blocks). */
  readonly kvCacheUsage: number;
  /** KV blocks held by running sequences, and the pool's size (engines with a paged KV). */
  readonly kvBlocksUsed?: number;
  readonly kvBlocksTotal?: number;
  /** Prompt tokens looked up in the prefix cache, and of those served from it. */
  readonly prefixCacheQueriedTokens?: number;
  readonly prefixCacheHitTokens?: number;
  /** Sequences preempted (blocks given back, recomputed later) so far. */
  readonly preemptions?: number;
  /** Requests admitted so far, and the seconds they spent waiting in the queue in total. */
  readonly admitted?: number;
  readonly queueTimeSeconds?: number;
}

export interface Engine {
  readonly modelId: string;
  readonly tokenizer: Tokenizer;
  /** Longest prompt + output the model accepts. */
  readonly maxModelLen: number;
  /**
   * Starts a generation. Throws `QueueFullError` synchronously when the waiting queue is full, so the HTTP layer
   * can answer 429 before any byte is sent.
   */
  generate(request: GenerateRequest): ReadableStream<EngineChunk>;
  stats(): EngineStats;
  /** Stops accepting work, lets running sequences finish, then releases backend resources. */
  close(): Promise<void>;
}

export class QueueFullError extends Error {
  override readonly name = "QueueFullError";
}
