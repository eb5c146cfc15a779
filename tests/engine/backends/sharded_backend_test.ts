import assert from "node:assert/strict";
import type { Backend, BatchEntry, StepOutput } from "../../../engine/backend.ts";
import { ShardedBackend } from "../../../engine/backends/worker_backend.ts";

/** A backend that records which sequences it saw and answers row `seqId` filled with the seqId. */
class RecordingBackend implements Backend {
  readonly vocabSize = 4;
  readonly maxPositions = 64;
  readonly seen = new Set<number>();
  readonly released: number[] = [];
  step(batch: readonly BatchEntry[]): Promise<StepOutput> {
    for (const e of batch) this.seen.add(e.seqId);
    return Promise.resolve({ logits: (i: number) => new Float32Array(this.vocabSize).fill(batch[i]!.seqId) });
  }
  truncate(): void {}
  release(seqId: number): void {
    this.released.push(seqId);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const entry = (seqId: number): BatchEntry => ({ seqId, tokens: [1], cachedLength: 0, logitsCount: 1 });

Deno.test("sharded backend: the main shard takes the first mainFirst sequences, then shards balance", async () => {
  const main = new RecordingBackend();
  const worker = new RecordingBackend();
  const sharded = new ShardedBackend([main, worker], { mainFirst: 3 });
  const ids = [1, 2, 3, 4, 5, 6, 7];
  const out = await sharded.step(ids.map(entry));
  // Rows come back in batch order whichever shard computed them.
  ids.forEach((id, i) => assert.equal(out.logits(i)[0], id));
  assert.deepEqual([...main.seen], [1, 2, 3, 7]);
  assert.deepEqual([...worker.seen], [4, 5, 6]);
  // Releasing frees main-shard room: the next new sequence goes there again.
  sharded.release(1);
  sharded.release(2);
  sharded.release(3);
  assert.deepEqual(main.released, [1, 2, 3]);
  await sharded.step([entry(8)]);
  assert.ok(main.seen.has(8));
});

Deno.test("sharded backend: by default 8 sequences stay on the main thread, the 9th and 10th go to the worker", async () => {
  const main = new RecordingBackend();
  const worker = new RecordingBackend();
  const sharded = new ShardedBackend([main, worker]);
  await sharded.step(Array.from({ length: 10 }, (_, i) => entry(i + 1)));
  assert.equal(main.seen.size, 8);
  assert.deepEqual([...worker.seen], [9, 10]);
});
