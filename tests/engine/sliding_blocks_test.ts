/**
 * The block manager's sliding-window pool (BackendInfo `slidingWindow`): sliding blocks go back once every later
 * window has passed them, a long sequence holds a bounded number of them while its main table grows, prefix hits
 * count only as far as the sliding blocks of their window are still cached, and preemption gives both pools back.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { BlockManager } from "../../engine/block_manager.ts";

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
const NONE = -1;

/** Entries of the sliding table that are not -1. */
const held = (bm: BlockManager, id: number) => bm.slidingBlockTable(id).filter((b) => b !== NONE).length;

Deno.test("sliding blocks: those wholly before the next window are given back when the computed length passes them", () => {
  // Window 10, blocks of 4: after 30 computed tokens the next position (30) sees back to 21, in block 5.
  const bm = new BlockManager({ numBlocks: 64, blockSize: 4, slidingWindow: 10, numSlidingBlocks: 12 });
  assert.equal(bm.allocatePrompt(1, range(0, 30), 30, 30), 0);
  assert.equal(bm.slidingBlockTable(1).length, 8, "the prefill's step needs every block of its window");
  assert.equal(bm.numUsedSlidingBlocks, 8);
  bm.assertWritable(1, 0);
  bm.markComputed(1, range(0, 30), 30);
  assert.deepEqual(bm.slidingBlockTable(1).slice(0, 5), [NONE, NONE, NONE, NONE, NONE]);
  assert.equal(held(bm, 1), 3);
  assert.equal(bm.numUsedSlidingBlocks, 3);
  assert.equal(bm.blockTable(1).length, 8, "the main table keeps every block");
  const row = new Int32Array(10).fill(7);
  bm.writeSlidingBlockTable(1, row, 0, 10, 30);
  assert.deepEqual(Array.from(row), [NONE, NONE, NONE, NONE, NONE, ...bm.slidingBlockTable(1).slice(5), NONE, NONE]);
  bm.free(1);
  assert.equal(bm.numUsedSlidingBlocks, 0);
  assert.equal(bm.numFreeSlidingBlocks, 12);
});

Deno.test("sliding blocks: a long sequence's main table grows while it holds at most ceil(W / bs) + 1 (+ lookahead)", () => {
  for (const [window, bs, lookahead] of [[10, 4, 0], [20, 16, 0], [128, 16, 4], [7, 1, 3], [16, 16, 2]] as const) {
    const bm = new BlockManager({ numBlocks: 1024, blockSize: bs, slidingWindow: window, numSlidingBlocks: 64 });
    const tokens = range(0, 600);
    assert.equal(bm.allocatePrompt(1, tokens, 1, 1), 0);
    const bound = Math.ceil(window / bs) + 1 + Math.ceil(lookahead / bs);
    for (let c = 1; c < 600 - lookahead; c++) {
      bm.markComputed(1, tokens, c);
      // The next step feeds position c (and a draft model's lookahead past it).
      assert.ok(bm.ensureCapacity(1, c + 1 + lookahead));
      bm.assertWritable(1, c);
      assert.equal(bm.blockTable(1).length, Math.ceil((c + 1 + lookahead) / bs));
      assert.ok(held(bm, 1) <= bound, `W ${window} bs ${bs}: ${held(bm, 1)} sliding blocks at ${c} (bound ${bound})`);
      assert.equal(bm.numUsedSlidingBlocks, held(bm, 1));
    }
    assert.ok(bm.blockTable(1).length > 3 * bound, "the main table outgrew the sliding bound");
  }
});

Deno.test("sliding blocks: a first chunk is cut to what the sliding pool holds, and capacity counts both pools", () => {
  const bm = new BlockManager({ numBlocks: 64, blockSize: 4, slidingWindow: 6, numSlidingBlocks: 6 });
  assert.equal(bm.allocatePrompt(1, range(0, 40), 40, 40), 0);
  assert.equal(bm.blockTable(1).length, 6, "six sliding blocks: 24 tokens");
  assert.equal(bm.maxTokensFor(1), 24, "the main pool has room, the sliding pool none");
  assert.equal(bm.ensureCapacity(1, 25), false);
  bm.markComputed(1, range(0, 40), 24); // next position 24 sees back to 19: blocks 0..3 go back
  assert.equal(held(bm, 1), 2);
  assert.equal(bm.maxTokensFor(1), 40);
  assert.ok(bm.ensureCapacity(1, 40));
  assert.equal(bm.allocatePrompt(2, range(100, 8), 8, 8), -1, "no sliding block left for a newcomer");
  assert.equal(bm.has(2), false);
});

Deno.test("sliding blocks: a prefix hit counts only as far as its window's sliding blocks are cached", () => {
  const W = 6;
  const bm = new BlockManager({
    numBlocks: 64,
    blockSize: 4,
    enablePrefixCache: true,
    slidingWindow: W,
    numSlidingBlocks: 12,
  });
  const a = range(0, 40);
  bm.allocatePrompt(1, a, 40, 40);
  bm.markComputed(1, a, 40);
  bm.free(1);
  // Everything is cached: a prompt extending A hits all 10 blocks (position 40 sees back to 35: blocks 8, 9).
  const probe = [...a, 90, 91, 92, 93];
  assert.equal(bm.allocatePrompt(2, probe, probe.length, probe.length), 40);
  assert.deepEqual(bm.slidingBlockTable(2).slice(0, 8), Array(8).fill(NONE));
  bm.assertWritable(2, 40);
  bm.free(2);
  // Another prompt touches A's blocks 2 and 3 through its own hit (position 16 sees back to 11), so they become the
  // most recently released; then a newcomer takes every other cached sliding block.
  const d = [...a.slice(0, 16), 70];
  assert.equal(bm.allocatePrompt(3, d, d.length, d.length), 16);
  bm.markComputed(3, d, d.length);
  bm.free(3);
  const stack = bm.numFreeSlidingBlocks - bm.numCachedSlidingBlocks;
  const evict = bm.numCachedSlidingBlocks - 2;
  const e = range(200, 4 * (stack + evict));
  assert.ok(bm.allocatePrompt(4, e, e.length, e.length) === 0);
  bm.free(4);
  // A prompt sharing A's first 24 tokens: its main blocks are all cached, but the window of position 24 (blocks 4, 5)
  // and of 20 (blocks 3, 4) lost their sliding blocks; that of 16 (blocks 2, 3) kept them.
  const b = [...a.slice(0, 24), 50, 51, 52, 53, 54, 55];
  assert.equal(bm.allocatePrompt(5, b, b.length, b.length), 16);
  assert.equal(bm.numFreeBlocks + bm.numUsedBlocks, 64);
  bm.assertWritable(5, 16);
  bm.markComputed(5, b, b.length);
  bm.free(5);
  // Without a sliding pool the same history hits all 24 tokens.
  const plain = new BlockManager({ numBlocks: 64, blockSize: 4, enablePrefixCache: true });
  for (const [id, p] of [[1, a], [3, d], [4, e]] as const) {
    plain.allocatePrompt(id, p, p.length, p.length);
    plain.markComputed(id, p, p.length);
    plain.free(id);
  }
  assert.equal(plain.allocatePrompt(5, b, b.length, b.length), 24);
});

Deno.test("sliding blocks: preempting (freeing) a sequence gives back both pools, shared blocks once", () => {
  const bm = new BlockManager({
    numBlocks: 32,
    blockSize: 4,
    enablePrefixCache: true,
    slidingWindow: 8,
    numSlidingBlocks: 16,
  });
  const p = range(0, 20);
  bm.allocatePrompt(1, p, 20, 20);
  bm.markComputed(1, p, 20);
  const q = [...p, 1, 2, 3];
  assert.equal(bm.allocatePrompt(2, q, q.length, q.length), 20, "a hit while the first sequence still runs");
  assert.ok(bm.numUsedSlidingBlocks < 16);
  bm.free(2);
  bm.free(1);
  assert.equal(bm.numUsedBlocks, 0);
  assert.equal(bm.numUsedSlidingBlocks, 0);
  assert.equal(bm.numFreeSlidingBlocks, 16);
});

Deno.test("sliding blocks: invariants hold under random allocate / grow / compute / free (fuzz)", () => {
  const bs = 4;
  const W = 9;
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.nat(3), fc.nat(5), fc.integer({ min: 1, max: 30 })), { minLength: 1, maxLength: 60 }),
      (ops) => {
        const bm = new BlockManager({
          numBlocks: 40,
          blockSize: bs,
          enablePrefixCache: true,
          slidingWindow: W,
          numSlidingBlocks: 14,
          keyBits: 3,
        });
        const alive = new Map<number, { tokens: number[]; computed: number }>();
        for (const [op, id, n] of ops) {
          const s = alive.get(id);
          if (op === 0 && s === undefined) {
            const tokens = Array.from({ length: n + 40 }, (_, i) => (i * (id % 2 + 1)) % 7);
            const cached = bm.allocatePrompt(id, tokens, n, n, 0);
            if (cached >= 0) {
              // The hit's window is in the sliding pool, the rest of the table is the sequence's own.
              bm.assertWritable(id, cached);
              const win = bm.slidingBlockTable(id);
              for (let j = Math.floor(Math.max(0, cached - W + 1) / bs); j < win.length; j++) {
                assert.notEqual(win[j], NONE);
              }
              alive.set(id, { tokens, computed: cached });
            }
          } else if (op === 1 && s !== undefined) {
            const c = Math.min(s.tokens.length, s.computed + n, bm.blockTable(id).length * bs);
            bm.markComputed(id, s.tokens, c);
            s.computed = c;
          } else if (op === 2 && s !== undefined) {
            bm.ensureCapacity(id, Math.min(s.tokens.length, s.computed + n));
          } else if (op === 3 && s !== undefined) {
            bm.free(id);
            alive.delete(id);
          }
          let used = 0;
          for (const [sid, seq] of alive) {
            const win = bm.slidingBlockTable(sid);
            assert.equal(win.length, bm.blockTable(sid).length);
            for (let j = 0; j < win.length; j++) {
              const needed = j >= Math.floor(Math.max(0, seq.computed - W + 1) / bs);
              assert.equal(win[j] !== NONE, needed, `sequence ${sid} block ${j} at computed ${seq.computed}`);
            }
            used += win.filter((b) => b !== NONE).length;
          }
          assert.ok(bm.numUsedSlidingBlocks <= used, "shared sliding blocks count once");
          assert.equal(bm.numUsedSlidingBlocks + bm.numFreeSlidingBlocks, 14);
        }
        for (const id of alive.keys()) bm.free(id);
        assert.equal(bm.numUsedSlidingBlocks, 0);
        assert.equal(bm.numUsedBlocks, 0);
      },
    ),
    { numRuns: 300, seed: 19 },
  );
});
