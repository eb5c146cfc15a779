/**
 * One engine generation as the HTTP layer sees it: the engine's chunk stream and the hooks (events/chunk_tap.ts) its
 * reader calls on every chunk — the pipelines take them as an argument and call them inline, any other reader wraps
 * the stream with `tapChunks` — so that
 * - cancelling the stream, or `stop()` (a client that went away), aborts the request's signal, so the engine stops at
 *   its next step and frees the sequence's KV memory even if it does not watch stream cancellation;
 * - timing and token counts reach the metrics exactly once, however the generation ends.
 *
 * `engine.generate` is called synchronously by `startGeneration`, so a full queue throws `QueueFullError` before
 * any response byte exists (→ 429).
 */
import type { Engine, EngineChunk, SamplingParams } from "../engine/engine.ts";
import type { ChunkTap } from "../events/chunk_tap.ts";
import type { Metrics } from "./metrics.ts";
import type { GenerationTotals } from "./request_trace.ts";
import type { TokenConstraint } from "../engine/token_constraint.ts";

export interface Generation {
  /** The engine's chunks, unhooked: read them only together with `tap`. */
  readonly source: ReadableStream<EngineChunk>;
  /** The hooks the reader of `source` calls for every chunk, at its end, and when it cancels. */
  readonly tap: ChunkTap;
  readonly abort: AbortController;
  /**
   * Aborts the generation unless it already finished, exactly as the reader's cancel (`tap.cancel`) would, for a
   * caller that does not hold the stream (the HTTP handler when the client's connection closes). Its stream then
   * ends within a step.
   */
  stop(): void;
  /** Resolves when the finish chunk passed or the stream was cancelled, with the generation's token counts. */
  readonly done: Promise<GenerationTotals>;
  /**
   * Resolves once the prompt is prefilled (the first step's tokens passed) or the generation ended: from then on the
   * prompt's full blocks are in the prefix cache.
   */
  readonly prefilled: Promise<void>;
}

export interface GenerationOptions {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly sampling: SamplingParams;
  readonly metrics: Metrics;
  /** performance.now() when the request arrived (TTFT includes queueing and prefill). */
  readonly startedAt: number;
  /** Called once if the consumer cancels the stream before the finish. */
  readonly onCancel?: () => void;
  /** The output grammar of this generation, released once it is done. */
  readonly constraint?: TokenConstraint & { dispose(): void };
  /** A later choice of a request already admitted: never refused by a full queue (GenerateRequest.admitted). */
  readonly admitted?: boolean;
}

export function startGeneration(engine: Engine, options: GenerationOptions): Generation {
  const abort = new AbortController();
  const source = engine.generate({
    id: options.id,
    promptTokens: options.promptTokens,
    sampling: options.sampling,
    signal: abort.signal,
    ...(options.constraint === undefined ? {} : { constraint: options.constraint }),
    ...(options.admitted === true ? { admitted: true } : {}),
  });
  let firstTokenAt: number | null = null;
  let lastTokenAt: number | null = null;
  let outputTokens = 0;
  let settled = false;
  let resolveDone!: (totals: GenerationTotals) => void;
  const done = new Promise<GenerationTotals>((resolve) => resolveDone = resolve);
  let resolvePrefilled!: () => void;
  const prefilled = new Promise<void>((resolve) => resolvePrefilled = resolve);
  const settle = (promptTokens: number, aborted: boolean) => {
    if (settled) return;
    settled = true;
    options.metrics.observeGeneration({
      promptTokens,
      outputTokens,
      ttft: firstTokenAt === null ? null : (firstTokenAt - options.startedAt) / 1000,
      decodeSeconds: firstTokenAt === null || lastTokenAt === null ? null : (lastTokenAt - firstTokenAt) / 1000,
      aborted,
    });
    resolveDone({ promptTokens, outputTokens });
    resolvePrefilled();
  };
  const stop = () => {
    // After the finish chunk the engine has let the sequence go already (the pipeline cancels its source once the
    // emitter ended, on every request): aborting then would only build an AbortError with its stack trace.
    if (settled) return;
    abort.abort();
    settle(options.promptTokens.length, true);
    options.onCancel?.();
  };
  // Hooks, not a wrapping stream: the pipelines call them inline as they read the engine's stream, so a step costs no
  // extra stream hop.
  const tap: ChunkTap = {
    chunk(chunk) {
      if (chunk.type === "step") {
        const now = performance.now();
        firstTokenAt ??= now;
        resolvePrefilled();
        lastTokenAt = now;
        outputTokens += chunk.tokens.length;
      } else {
        outputTokens = chunk.outputTokens;
        settle(chunk.promptTokens, chunk.reason === "abort");
      }
    },
    end: () => settle(options.promptTokens.length, false),
    cancel: stop,
  };
  // After a cancel the engine may still consult the constraint in the step in flight; a disposed constraint allows
  // every token, so releasing it as soon as the generation is done is safe.
  if (options.constraint !== undefined) {
    const constraint = options.constraint;
    done.then(() => constraint.dispose());
  }
  return { source, tap, abort, done, stop, prefilled };
}

/** Cancels a generation nobody has read yet as its reader would: the hooks first, then the engine's stream. */
export async function cancelUnread(generation: Generation): Promise<void> {
  generation.tap.cancel();
  await generation.source.cancel().catch(() => {});
}

/**
 * Stops `generation` as soon as the client's connection closes, until it finished. Deno aborts `request.signal` at
 * once on a disconnect, even while nothing is being written: a stream that sends nothing for many steps (a model
 * still inside a header, a long reasoning with no text yet) would otherwise only notice at its next write.
 */
export function stopOnDisconnect(request: Request, generation: Generation): void {
  const signal = request.signal;
  const onAbort = () => generation.stop();
  signal.addEventListener("abort", onAbort, { once: true });
  generation.done.then(() => signal.removeEventListener("abort", onAbort));
}
