/**
 * The `n` choices of one Chat Completions or legacy Completions request: `n` generations of the same prompt. Choice 0
 * starts at once; the others start when its prompt is prefilled, so the engine's prefix cache serves them the
 * prompt's full blocks instead of prefilling it `n` times. Each later choice is a generation whose stream exists from
 * the start and is fed once it runs. Later choices are started as `admitted` (the request was admitted with choice 0), so
 * a queue that filled meanwhile never refuses them; one that still cannot start (the engine closing) ends with an
 * error.
 */
import type { EngineChunk } from "../../engine/engine.ts";
import type { ChunkTap } from "../../events/chunk_tap.ts";
import type { Generation } from "../generation.ts";
import type { GenerationTotals } from "../request_trace.ts";

/** Starts choice 0 now and every other one after its prefill; `start(i)` starts choice i. */
export function startChoices(n: number, start: (index: number) => Generation): Generation[] {
  const first = start(0);
  const choices = [first];
  for (let i = 1; i < n; i++) choices.push(deferredGeneration(first.prefilled, () => start(i)));
  return choices;
}

/** A generation started by `start` once `ready` resolves (never, when stopped before). */
export function deferredGeneration(ready: Promise<void>, start: () => Generation): Generation {
  const abort = new AbortController();
  let inner: Generation | null = null;
  const begun: Promise<Generation | null> = ready.then(() => {
    if (abort.signal.aborted) return null;
    inner = start();
    return inner;
  });
  let reader: ReadableStreamDefaultReader<EngineChunk> | null = null;
  const none: GenerationTotals = { promptTokens: 0, outputTokens: 0 };
  const done = begun.then((g) => g === null ? none : g.done, () => none);
  const stop = () => {
    abort.abort();
    inner?.stop();
  };
  const source = new ReadableStream<EngineChunk>({
    async pull(controller) {
      const g = await begun;
      if (g === null) return controller.close();
      reader ??= g.source.getReader();
      const r = await reader.read();
      if (r.done) controller.close();
      else controller.enqueue(r.value);
    },
    async cancel(reason) {
      abort.abort();
      const g = await begun.catch(() => null);
      if (g === null) return;
      await (reader ?? g.source).cancel(reason);
    },
  }, { highWaterMark: 0 });
  // The started generation's hooks; before it starts no chunk exists, and a cancel keeps it from starting.
  const tap: ChunkTap = {
    chunk: (chunk) => inner?.tap.chunk(chunk),
    end: () => inner?.tap.end(),
    cancel: () => {
      abort.abort();
      inner?.tap.cancel();
    },
  };
  return { source, tap, abort, done, stop, prefilled: begun.then((g) => g?.prefilled, () => {}) };
}
