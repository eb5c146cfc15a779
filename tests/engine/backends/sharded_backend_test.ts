import assert from "node:assert/strict";
import type { LogitsBackend } from "../../../engine/backends/logits_backend.ts";
import type { StepBatch } from "../../../engine/step_batch.ts";
import { ShardedBackend } from "../../../engine/backends/worker_backend.ts";
import { packBatch, type PackEntry, rowsOf } from "../../../testing/pack_batch.ts";

/** A backend that records which sequences it saw and answers each sampled row filled with its seqId. */
class RecordingBackend implements LogitsBackend {
  readonly vocabSize = 4;
  readonly maxPositions = 64;
  readonly sharesPrefixBlocks = false;
  readonly seen = new Set<number>();
  readonly released: number[] = [];
  forward(batch: StepBatch): Promise<Float32Array> {
    const rows: number[] = [];
    for (let i = 0; i < batch.numSeqs; i++) {
      this.seen.add(batch.seqIds[i]!);
      const n = batch.sampleFlags[i] === 1 ? batch.draftCounts[i]! + 1 : 0;
      for (let r = 0; r < n * this.vocabSize; r++) rows.push(batch.seqIds[i]!);
    }
    return Promise.resolve(Float32Array.from(rows));
  }
  release(seqId: number): void {
    this.released.push(seqId);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const entry = (seqId: number, logitsCount = 1): PackEntry => ({
  seqId,
  tokens: [1, 2, 3],
  cachedLength: 0,
  logitsCount,
});

Deno.test("sharded backend: the main shard takes the first mainFirst sequences, then shards balance", async () => {
  const main = new RecordingBackend();
  const worker = new RecordingBackend();
  const sharded = new ShardedBackend([main, worker], { mainFirst: 3 });
  const ids = [1, 2, 3, 4, 5, 6, 7];
  // Mixed row counts (a chunk with none, verifies with several), so the reassembly is checked row by row.
  const entries = ids.map((id) => entry(id, id % 3));
  const rows = rowsOf(await sharded.forward(packBatch(entries)), entries, 4);
  // Rows come back in batch order whichever shard computed them.
  ids.forEach((id, i) => {
    assert.equal(rows[i]!.length, (id % 3) * 4);
    for (const v of rows[i]!) assert.equal(v, id);
  });
  assert.deepEqual([...main.seen], [1, 2, 3, 7]);
  assert.deepEqual([...worker.seen], [4, 5, 6]);
  // Releasing frees main-shard room: the next new sequence goes there again.
  sharded.release(1);
  sharded.release(2);
  sharded.release(3);
  assert.deepEqual(main.released, [1, 2, 3]);
  await sharded.forward(packBatch([entry(8)]));
  assert.ok(main.seen.has(8));
});

Deno.test("sharded backend: by default 8 sequences stay on the main thread, the 9th and 10th go to the worker", async () => {
  const main = new RecordingBackend();
  const worker = new RecordingBackend();
  const sharded = new ShardedBackend([main, worker]);
  await sharded.forward(packBatch(Array.from({ length: 10 }, (_, i) => entry(i + 1))));
  assert.equal(main.seen.size, 8);
  assert.deepEqual([...worker.seen], [9, 10]);
});
