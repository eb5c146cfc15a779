/**
 * The shared prefix-block pool: a block written through one handle is read through another on the same buffers (as
 * the main thread and a worker do), the memory grows only as far as the block ids written, and ids outside the pool
 * or blocks never written are refused.
 */
import assert from "node:assert/strict";
import { BlockPool, createBlockPool } from "../../../engine/backends/block_pool.ts";

Deno.test("block pool: shared between handles, grown on demand, bounded by its block count", () => {
  const buffers = createBlockPool({ blockSize: 4, numBlocks: 40, numLayers: 2, kvHeads: 3, headDim: 5 });
  assert.equal(buffers.tensors, 4);
  assert.equal(buffers.blockFloats, 3 * 4 * 5);
  assert.equal(buffers.data.byteLength, 0);
  assert.equal(buffers.data.maxByteLength, 40 * 4 * 60 * 4);
  const writer = new BlockPool(buffers);
  const reader = new BlockPool(buffers);
  assert.equal(reader.has(2), false);
  assert.throws(() => reader.read(2), /block 2 holds no KV/);
  const views = writer.write(2);
  assert.equal(views.length, 4);
  views.forEach((v, k) => v.fill(k + 0.5));
  // Grown to whole steps of blocks, not to the pool's size.
  assert.ok(buffers.data.byteLength >= 3 * 4 * 60 * 4 && buffers.data.byteLength < buffers.data.maxByteLength);
  assert.equal(reader.has(2), true);
  assert.deepEqual(reader.read(2).map((v) => [v.length, v[0], v[59]]), [0, 1, 2, 3].map((k) => [60, k + 0.5, k + 0.5]));
  // The last block makes it grow to the end; its neighbours are untouched.
  writer.write(39).forEach((v) => v.fill(9));
  assert.equal(buffers.data.byteLength, buffers.data.maxByteLength);
  assert.equal(reader.read(2)[3]![0], 3.5);
  assert.equal(reader.has(38), false);
  assert.throws(() => writer.write(40), RangeError);
  assert.throws(() => writer.write(-1), RangeError);
  assert.equal(reader.has(40), false);
  assert.throws(() => createBlockPool({ blockSize: 0, numBlocks: 1, numLayers: 1, kvHeads: 1, headDim: 1 }));
});
