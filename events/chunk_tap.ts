/**
 * A per-chunk hook on an engine chunk stream, for a caller that must watch every chunk (metrics, abort on cancel)
 * without costing the pipeline a stream hop per engine step.
 *
 * `tapChunks` returns an ordinary stream that calls the hooks as chunks pass, so any consumer can read it. The
 * pipeline (events/pipeline.ts) instead takes the tap apart with `untap`: it reads the source directly and calls the
 * same hooks inline, in the same order, so one step crosses one stream boundary fewer and allocates a read result and
 * its promises fewer. The hooks see the same calls either way.
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

export interface Tapped {
  readonly source: ReadableStream<EngineChunk>;
  readonly tap: ChunkTap;
}

/** Taps not yet read through their stream, by the stream `tapChunks` returned. */
const untouched = new WeakMap<ReadableStream<EngineChunk>, Tapped>();

export function tapChunks(source: ReadableStream<EngineChunk>, tap: ChunkTap): ReadableStream<EngineChunk> {
  let reader: ReadableStreamDefaultReader<EngineChunk> | null = null;
  const open = () => {
    untouched.delete(stream);
    return reader ??= source.getReader();
  };
  const stream: ReadableStream<EngineChunk> = new ReadableStream<EngineChunk>({
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
  untouched.set(stream, { source, tap });
  return stream;
}

/**
 * The source and hooks of a stream from `tapChunks` that nothing has read or cancelled yet, locking that stream so
 * nothing else can; undefined for any other stream (read it as it is).
 */
export function untap(stream: ReadableStream<EngineChunk>): Tapped | undefined {
  const tapped = untouched.get(stream);
  if (tapped === undefined || stream.locked) return undefined;
  untouched.delete(stream);
  stream.getReader();
  return tapped;
}
