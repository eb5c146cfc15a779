import assert from "node:assert/strict";
import fc from "fast-check";
import { BlockManager } from "../../engine/block_manager.ts";

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** Allocates a whole prompt and marks it computed, as a finished prefill would. */
function prefill(bm: BlockManager, id: number, tokens: readonly number[]): number {
  const cached = bm.allocatePrompt(id, tokens, tokens.length, tokens.length);
  assert.ok(cached >= 0, `prompt ${id} fits`);
  bm.markComputed(id, tokens, tokens.length);
  return cached;
}

Deno.test("block manager: blocks are taken as the sequence grows, not up front", () => {
  const bm = new BlockManager({ numBlocks: 8, blockSize: 4 });
  assert.equal(bm.allocatePrompt(1, range(0, 5), 5, 5), 0);
  assert.equal(bm.blockTable(1).length, 2);
  assert.equal(bm.numUsedBlocks, 2);
  assert.ok(bm.ensureCapacity(1, 8));
  assert.equal(bm.blockTable(1).length, 2, "8 tokens still fit two blocks");
  assert.ok(bm.ensureCapacity(1, 9));
  assert.equal(bm.blockTable(1).length, 3);
  assert.equal(bm.usage, 3 / 8);
  assert.equal(bm.maxTokensFor(1), 8 * 4);
  assert.equal(bm.ensureCapacity(1, 8 * 4 + 1), false, "more than the pool");
  assert.equal(bm.blockTable(1).length, 3, "a refused request changes nothing");
  bm.free(1);
  assert.equal(bm.numFreeBlocks, 8);
  assert.equal(bm.numUsedBlocks, 0);
});

Deno.test("block manager: allocatePrompt refuses a first chunk the pool cannot hold, without side effects", () => {
  const bm = new BlockManager({ numBlocks: 3, blockSize: 4 });
  assert.equal(bm.allocatePrompt(1, range(0, 20), 20, 20), -1);
  assert.equal(bm.has(1), false);
  assert.equal(bm.numFreeBlocks, 3);
  assert.equal(bm.queriedTokens, 0);
  assert.equal(bm.allocatePrompt(1, range(0, 20), 20, 12), 0, "a 12-token first chunk fits");
  assert.deepEqual(bm.blockTable(1), [0, 1, 2]);
  assert.throws(() => bm.allocatePrompt(1, range(0, 4), 4, 4), /already holds/);
});

Deno.test("block manager: prompts with a common 3-block prefix share exactly those blocks", () => {
  const bm = new BlockManager({ numBlocks: 16, blockSize: 4, enablePrefixCache: true });
  const a = [...range(100, 12), 7, 8];
  assert.equal(prefill(bm, 1, a), 0);
  const b = [...range(100, 12), 9, 9, 9];
  assert.equal(bm.allocatePrompt(2, b, b.length, b.length), 12);
  assert.deepEqual(bm.blockTable(2).slice(0, 3), bm.blockTable(1).slice(0, 3));
  assert.notEqual(bm.blockTable(2)[3], bm.blockTable(1)[3], "the partial fourth block is never shared");
  for (const blk of bm.blockTable(1).slice(0, 3)) assert.equal(bm.refCount(blk), 2);
  assert.equal(bm.hitTokens, 12);
  assert.equal(bm.queriedTokens, a.length + b.length);

  const c = [...range(100, 12), 9];
  c[5] = 0; // differs inside block 2
  assert.equal(bm.allocatePrompt(3, c, c.length, c.length), 4);
  assert.equal(bm.blockTable(3)[0], bm.blockTable(1)[0]);
  assert.notEqual(bm.blockTable(3)[1], bm.blockTable(1)[1]);

  // Same tokens at a different depth: block 2's tokens as a first block are another prefix.
  const d = [...range(104, 8), 1];
  assert.equal(bm.allocatePrompt(4, d, d.length, d.length), 0);
});

Deno.test("block manager: the last prompt token is always computed, even when every block is cached", () => {
  const bm = new BlockManager({ numBlocks: 16, blockSize: 4, enablePrefixCache: true });
  const a = range(0, 12);
  prefill(bm, 1, a);
  assert.equal(bm.allocatePrompt(2, a, 12, 12), 8, "floor((12 - 1) / 4) = 2 blocks");
  assert.equal(bm.blockTable(2).length, 3);
  assert.equal(bm.refCount(bm.blockTable(1)[2]!), 1, "block 3 is not shared: sequence 2 writes its last slot");
  bm.assertWritable(2, 8);
  assert.throws(() => bm.assertWritable(2, 7), /shared block/);
});

Deno.test("block manager: only computed full blocks are registered", () => {
  const bm = new BlockManager({ numBlocks: 16, blockSize: 4, enablePrefixCache: true });
  const a = range(0, 12);
  assert.equal(bm.allocatePrompt(1, a, 12, 12), 0);
  bm.markComputed(1, a, 7); // one full block computed
  assert.equal(bm.isCached(bm.blockTable(1)[0]!), true);
  assert.equal(bm.isCached(bm.blockTable(1)[1]!), false);
  assert.equal(bm.allocatePrompt(2, a, 12, 12), 4);
  assert.throws(() => bm.markComputed(1, a, 13), RangeError);
});

Deno.test("block manager: released cached blocks stay reusable until needed, then evicted least recent first", () => {
  const bm = new BlockManager({ numBlocks: 7, blockSize: 4, enablePrefixCache: true });
  const a = range(0, 8); // 2 full blocks
  const b = range(50, 8);
  prefill(bm, 1, a);
  prefill(bm, 2, b);
  const [a0, a1] = bm.blockTable(1);
  const [b0, b1] = bm.blockTable(2);
  bm.free(1); // released first: evicted first
  bm.free(2);
  assert.equal(bm.numCachedBlocks, 4);
  assert.equal(bm.numUsedBlocks, 0);
  assert.equal(bm.numFreeBlocks, 7);
  // 4 blocks: the 3 free ones, then 1 evicted — a's tail block (a sequence releases its tail first).
  assert.equal(bm.allocatePrompt(3, range(200, 16), 16, 16), 0);
  assert.deepEqual([a0, a1, b0, b1].map((x) => bm.isCached(x!)), [true, false, true, true]);
  assert.equal(bm.allocatePrompt(4, [...b, 1], 9, 9), 8, "b is intact and reused");
  assert.deepEqual(bm.blockTable(4).slice(0, 2), [b0, b1]);
  assert.equal(bm.isCached(a0!), false, "the one new block evicted the least recent cached block");
  assert.equal(bm.numFreeBlocks, 0);
  bm.free(3);
  assert.equal(bm.allocatePrompt(5, [...a, 1], 9, 9), 0, "a is gone");
  assert.equal(bm.hitTokens, 8);
});

Deno.test("block manager: a hit on an evictable block is not counted as room for new blocks", () => {
  const bm = new BlockManager({ numBlocks: 3, blockSize: 4, enablePrefixCache: true });
  const a = range(0, 8);
  prefill(bm, 1, a);
  bm.free(1);
  assert.equal(bm.numFreeBlocks, 3);
  // Reusing both cached blocks leaves 1 block: a 13-token prompt needs 2 more, so it does not fit.
  assert.equal(bm.allocatePrompt(2, [...a, 1, 2, 3, 4, 5], 13, 13), -1);
  assert.equal(bm.numCachedBlocks, 2, "nothing was taken");
  assert.equal(bm.allocatePrompt(2, [...a, 1, 2, 3, 4, 5], 13, 4), 8);
  assert.equal(bm.numFreeBlocks, 0);
});

Deno.test("block manager: identical blocks computed at once stay private and the cache keeps one", () => {
  const bm = new BlockManager({ numBlocks: 16, blockSize: 4, enablePrefixCache: true });
  const a = range(0, 9);
  assert.equal(bm.allocatePrompt(1, a, 9, 9), 0);
  assert.equal(bm.allocatePrompt(2, a, 9, 9), 0);
  bm.markComputed(1, a, 9);
  bm.markComputed(2, a, 9);
  const cached = [...bm.blockTable(1), ...bm.blockTable(2)].filter((b) => bm.isCached(b));
  assert.deepEqual(cached, bm.blockTable(1).slice(0, 2));
  // Sequence 2 keeps extending its own chain: its third block, registered later, is found under the shared prefix.
  const longer = [...range(0, 12), 5];
  assert.ok(bm.ensureCapacity(2, 13));
  bm.markComputed(2, longer, 12);
  assert.equal(bm.allocatePrompt(3, longer, 13, 13), 12);
  assert.deepEqual(bm.blockTable(3).slice(0, 3), [...bm.blockTable(1).slice(0, 2), bm.blockTable(2)[2]]);
});

Deno.test("block manager: a hash collision costs a comparison, never a wrong hit", () => {
  // One bucket for everything: every lookup must check the parent and the tokens.
  const bm = new BlockManager({ numBlocks: 32, blockSize: 2, enablePrefixCache: true, keyBits: 0 });
  prefill(bm, 1, [1, 2, 3, 4, 5]);
  prefill(bm, 2, [3, 4, 1, 2, 9]);
  assert.equal(bm.allocatePrompt(3, [3, 4, 3, 4, 9], 5, 5), 2, "[3, 4] at depth 1 is not the cached [1, 2] → [3, 4]");
  assert.equal(bm.blockTable(3)[0], bm.blockTable(2)[0]);
  assert.equal(bm.allocatePrompt(4, [1, 2, 1, 2, 9], 5, 5), 2);
  assert.equal(bm.allocatePrompt(5, [1, 2, 3, 4, 9], 5, 5), 4);
  assert.deepEqual(bm.blockTable(5).slice(0, 2), bm.blockTable(1).slice(0, 2));
  assert.equal(bm.allocatePrompt(6, [1, 3, 3, 4, 9], 5, 5), 0);
  for (let id = 1; id <= 6; id++) bm.free(id);
  assert.equal(bm.numUsedBlocks, 0);
  assert.equal(bm.numCachedBlocks, 4, "the full blocks of 1 and 2; the others were never computed");
});

Deno.test("block manager: writeBlockTable pads with -1 and refuses a short row", () => {
  const bm = new BlockManager({ numBlocks: 8, blockSize: 4 });
  bm.allocatePrompt(7, range(0, 6), 6, 6);
  const out = new Int32Array(8).fill(99);
  bm.writeBlockTable(7, out, 4, 4);
  assert.deepEqual([...out], [99, 99, 99, 99, 0, 1, -1, -1]);
  assert.throws(() => bm.writeBlockTable(7, out, 0, 1), RangeError);
  bm.writeBlockTable(7, out, 0, 3, 4);
  assert.deepEqual([...out.subarray(0, 4)], [0, -1, -1, 99], "only the blocks the context reaches");
  assert.throws(() => bm.writeBlockTable(7, out, 0, 3, 9), RangeError);
});

/** Recounts everything from the outside and checks the pool's invariants. */
function checkInvariants(bm: BlockManager, tables: Map<number, number>) {
  const holders = new Int32Array(bm.numBlocks);
  for (const [id, computed] of tables) {
    const table = bm.blockTable(id);
    assert.equal(new Set(table).size, table.length, "a table lists a block once");
    table.forEach((b, j) => {
      holders[b]!++;
      if (bm.isCached(b)) assert.ok((j + 1) * bm.blockSize <= computed, "a cached block is full and computed");
    });
  }
  let used = 0;
  for (let b = 0; b < bm.numBlocks; b++) {
    assert.equal(bm.refCount(b), holders[b], `refcount of block ${b}`);
    assert.ok(bm.refCount(b) >= 0);
    if (holders[b]! > 1) assert.ok(bm.isCached(b), `block ${b} shared but not a cached prefix block`);
    if (holders[b]! > 0) used++;
  }
  assert.equal(bm.numUsedBlocks, used);
  assert.equal(bm.numFreeBlocks + bm.numUsedBlocks, bm.numBlocks);
  assert.ok(bm.numCachedBlocks <= bm.numFreeBlocks);
}

Deno.test("block manager: invariants hold under random allocate / grow / compute / free (fuzz)", () => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant("alloc" as const), prefix: fc.nat(3), tail: fc.array(fc.nat(3), { maxLength: 9 }) }),
    fc.record({ kind: fc.constant("grow" as const), pick: fc.nat(), by: fc.integer({ min: 1, max: 7 }) }),
    fc.record({ kind: fc.constant("free" as const), pick: fc.nat() }),
  );
  fc.assert(
    fc.property(fc.integer({ min: 4, max: 24 }), fc.array(op, { maxLength: 60 }), (numBlocks, ops) => {
      const bm = new BlockManager({ numBlocks, blockSize: 3, enablePrefixCache: true, keyBits: 1 });
      const prefixes = [[], [1, 2, 3], [1, 2, 3, 4, 5, 6], [1, 2, 3, 9, 9, 9, 4]];
      const live = new Map<number, { tokens: number[]; computed: number }>();
      const computed = new Map<number, number>();
      let nextId = 1;
      for (const o of ops) {
        if (o.kind === "alloc") {
          const tokens = [...prefixes[o.prefix]!, ...o.tail, 7];
          const id = nextId++;
          const cached = bm.allocatePrompt(id, tokens, tokens.length, tokens.length);
          if (cached < 0) continue;
          assert.ok(cached % 3 === 0 && cached < tokens.length);
          bm.markComputed(id, tokens, tokens.length);
          live.set(id, { tokens, computed: tokens.length });
        } else {
          const ids = [...live.keys()];
          if (ids.length === 0) continue;
          const id = ids[o.pick % ids.length]!;
          const s = live.get(id)!;
          if (o.kind === "free") {
            bm.free(id);
            live.delete(id);
          } else if (bm.ensureCapacity(id, s.tokens.length + o.by)) {
            for (let i = 0; i < o.by; i++) s.tokens.push((id + i) % 4);
            bm.assertWritable(id, s.computed);
            bm.markComputed(id, s.tokens, s.tokens.length);
            s.computed = s.tokens.length;
          }
        }
        computed.clear();
        for (const [id, s] of live) computed.set(id, s.computed);
        checkInvariants(bm, computed);
      }
      for (const id of live.keys()) bm.free(id);
      checkInvariants(bm, new Map());
      assert.equal(bm.numUsedBlocks, 0);
    }),
    { numRuns: 300 },
  );
});
