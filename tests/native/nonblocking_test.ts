import assert from "node:assert/strict";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { prefillBatch, resultBuffers } from "./step_batches.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test("native: a step runs off the event loop (timers fire while it computes); release waits for it", async () => {
  const backend = await NativeBackend.create(`${ROOT}models/rill-tiny-harmony`, {
    threads: 1,
    maxSeqs: 4,
    maxBatchTokens: 1024,
    numBlocks: 128,
  });
  try {
    // 4 × 250 prompt tokens: long enough (tens of milliseconds) that a blocking call would starve the timers.
    const seqs = [0, 1, 2, 3].map((s) => ({
      seqId: s + 1,
      tokens: Array.from({ length: 250 }, (_, i) => (i * 7 + s) % 900),
    }));
    const batch = prefillBatch(backend.info, seqs);
    const result = resultBuffers(backend.info, seqs.length);
    let ticks = 0;
    let done = false;
    const tick = () => {
      if (done) return;
      ticks++;
      setTimeout(tick, 0);
    };
    setTimeout(tick, 0);
    const started = performance.now();
    const step = backend.step(batch, result);
    backend.release(1); // deferred until the step returns: the library is not thread-safe
    await assert.rejects(backend.step(batch, result), /already running/);
    await step;
    done = true;
    const ms = performance.now() - started;
    assert.ok(ticks >= 2, `only ${ticks} timer ticks during a ${ms.toFixed(1)} ms step`);
    assert.deepEqual([...result.counts], [1, 1, 1, 1]);
  } finally {
    await backend.close();
  }
});
