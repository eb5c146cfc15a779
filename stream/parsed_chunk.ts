/**
 * What the parse stage hands the emitter: per engine step, the segments its tokens produced (in token order), and
 * at the end exactly one finish. Model-neutral: Chat Completions consumes the same chunks.
 */
import type { FinishReason } from "../engine/engine.ts";
import type { Segment } from "../parsers/segment.ts";
import type { Usage } from "./types.ts";

export type ParsedChunk =
  | { readonly type: "segments"; readonly segments: readonly Segment[] }
  | { readonly type: "finish"; readonly reason: FinishReason; readonly usage: Usage; readonly message?: string };
