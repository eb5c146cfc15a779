/**
 * Per-chunk hooks on an engine chunk stream, for a caller that must watch every chunk (metrics, abort on cancel).
 *
 * A pipeline that reads the engine's stream itself receives the hooks as an argument (PipelineOptions.tap,
 * ChatPipelineOptions.tap) and calls them inline, so a step costs no extra stream hop; `tapChunks` wraps the stream
 * for any other reader. Either way the hooks see the same calls in the same order.
 */
import type { EngineChunk } from "../engine/engine.ts";

export interface ChunkTap {
  /** Every chunk, before the consumer sees it. */
  chunk(chunk: EngineChunk): void;
  /** The source ended (done, or its read failed), before the consumer learns of it. */
  end(): void;
  /** The consumer cancelled; runs before the source is cancelled. */
  cancel(): void;
}

export function tapChunks(source: ReadableStream<EngineChunk>, tap: ChunkTap): ReadableStream<EngineChunk> {
  let reader: ReadableStreamDefaultReader<EngineChunk> | null = null;
  const open = () => reader ??= source.getReader();
  return new ReadableStream<EngineChunk>({
    async pull(controller) {
      const r = open();
      let result: ReadableStreamReadResult<EngineChunk>;
      try {
        result = await r.read();
      } catch (error) {
        tap.end();
        throw error;
      }
      if (result.done) {
        tap.end();
        controller.close();
        return;
      }
      tap.chunk(result.value);
      controller.enqueue(result.value);
    },
    async cancel(reason) {
      const r = open();
      tap.cancel();
      await r.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
