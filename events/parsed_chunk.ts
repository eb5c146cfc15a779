/**
 * What the parse stage hands the emitter: per engine step, the segments its tokens produced (in token order), and
 * at the end exactly one finish. Model-neutral: Chat Completions consumes the same chunks.
 */
import type { FinishReason } from "../engine/engine.ts";
import type { Segment } from "../parsers/segment.ts";
import type { Usage } from "./types.ts";

export type ParsedChunk =
  | { readonly type: "segments"; readonly segments: readonly Segment[] }
  | {
    readonly type: "finish";
    readonly reason: FinishReason;
    readonly usage: Usage;
    readonly message?: string;
    /** Code of the `error` event of an "error" finish (default `server_error`), e.g. `server_shutting_down`. */
    readonly code?: string;
  };

/** What an aborted generation reports instead of a cancellation, when its abort was the server's doing. */
export interface AbortAsError {
  readonly code: string;
  readonly message: string;
}
