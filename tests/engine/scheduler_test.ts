import assert from "node:assert/strict";
import fc from "fast-check";
import { BlockManager } from "../../engine/block_manager.ts";
import { QueueFullError } from "../../engine/engine.ts";
import { type Schedulable, Scheduler, type SchedulerOptions, type StepPlan } from "../../engine/scheduler.ts";

class Seq implements Schedulable {
  readonly id: number;
  readonly tokens: Int32Array;
  readonly promptLength: number;
  length: number;
  computedLength = 0;
  cachedPromptTokens = 0;
  readonly maxTokens: number;

  constructor(id: number, prompt: readonly number[], maxTokens: number, maxModelLen: number) {
    this.id = id;
    this.tokens = new Int32Array(maxModelLen);
    this.tokens.set(prompt);
    this.promptLength = prompt.length;
    this.length = prompt.length;
    this.maxTokens = maxTokens;
  }

  get generated(): number {
    return this.length - this.promptLength;
  }
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

interface Setup {
  numBlocks: number;
  blockSize?: number;
  prefix?: boolean;
  opts?: Partial<SchedulerOptions>;
}

function make({ numBlocks, blockSize = 4, prefix = false, opts = {} }: Setup) {
  const bm = new BlockManager({ numBlocks, blockSize, enablePrefixCache: prefix });
  const s = new Scheduler<Seq>({ maxNumSeqs: 4, maxQueue: 8, maxNumBatchedTokens: 64, maxModelLen: 32, ...opts }, bm);
  return { bm, s };
}

/** Plain shape of a plan, for deepEqual. */
function shape(plan: StepPlan<Seq>) {
  return plan.entries.map((e) => [e.seq.id, e.start, e.count, e.drafts, e.sample]);
}

/** Completes a planned step as an engine would: sampled entries gain one token (100 + length), all commit. */
function finishStep(s: Scheduler<Seq>, plan: StepPlan<Seq>) {
  for (const e of plan.entries) {
    if (e.sample) e.seq.tokens[e.seq.length] = 100 + e.seq.length, e.seq.length++;
    s.commit(e.seq, e.start + e.count);
  }
}

Deno.test("scheduler: the pool must hold one full-context sequence; the budget one token per running sequence", () => {
  const bm = new BlockManager({ numBlocks: 7, blockSize: 4 });
  assert.throws(
    () => new Scheduler({ maxNumSeqs: 2, maxQueue: 1, maxNumBatchedTokens: 8, maxModelLen: 29 }, bm),
    /needs 8/,
  );
  new Scheduler({ maxNumSeqs: 2, maxQueue: 1, maxNumBatchedTokens: 8, maxModelLen: 28 }, bm);
  assert.throws(() => new Scheduler({ maxNumSeqs: 9, maxQueue: 1, maxNumBatchedTokens: 8, maxModelLen: 28 }, bm));
});

Deno.test("scheduler: admits up to maxNumSeqs in FIFO order, then queues", () => {
  const { s } = make({ numBlocks: 64, opts: { maxNumSeqs: 2, maxQueue: 2 } });
  const seqs = range(1, 4).map((id) => new Seq(id, [1, 2, 3], 5, 32));
  for (const q of seqs) s.enqueue(q);
  const plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 0, 3, 0, true], [2, 0, 3, 0, true]]);
  assert.deepEqual(s.waiting.map((x) => x.id), [3, 4]);
  finishStep(s, plan);
  s.remove(seqs[0]!);
  const next = s.schedule();
  assert.deepEqual(shape(next), [[2, 3, 1, 0, true], [3, 0, 3, 0, true]]);
  assert.deepEqual(s.running.map((x) => x.id), [2, 3], "running order is stable: newcomers go last");
});

Deno.test("scheduler: queue full throws QueueFullError, counting free slots as not waiting", () => {
  const { s } = make({ numBlocks: 64, opts: { maxNumSeqs: 1, maxQueue: 1 } });
  s.enqueue(new Seq(1, [1], 4, 32)); // takes the free slot at the next step
  s.enqueue(new Seq(2, [1], 4, 32)); // the one queue place
  assert.throws(() => s.enqueue(new Seq(3, [1], 4, 32)), QueueFullError);
  s.schedule();
  assert.throws(() => s.enqueue(new Seq(3, [1], 4, 32)), QueueFullError);
  const zero = make({ numBlocks: 64, opts: { maxNumSeqs: 1, maxQueue: 0 } }).s;
  zero.enqueue(new Seq(1, [1], 4, 32));
  assert.throws(() => zero.enqueue(new Seq(2, [1], 4, 32)), QueueFullError);
});

Deno.test("scheduler: a later part of an admitted request is queued past the bound", () => {
  const { s } = make({ numBlocks: 64, opts: { maxNumSeqs: 1, maxQueue: 1 } });
  s.enqueue(new Seq(1, [1], 4, 32));
  s.enqueue(new Seq(2, [1], 4, 32));
  assert.throws(() => s.enqueue(new Seq(3, [1], 4, 32)), QueueFullError);
  s.enqueue(new Seq(3, [1], 4, 32), true);
  assert.equal(s.waiting.length, 3);
  assert.throws(() => s.enqueue(new Seq(4, [1], 4, 32)), QueueFullError, "the bound still holds for new requests");
});

Deno.test("scheduler: blocks are taken on demand, so full-context requests do not shut others out", () => {
  // The pool holds exactly one full context (32 tokens); under worst-case reservation only one request would run.
  const { s, bm } = make({ numBlocks: 8, opts: { maxNumSeqs: 4 } });
  const seqs = range(1, 4).map((id) => new Seq(id, [id, id, id], 32 - 3, 32));
  for (const q of seqs) s.enqueue(q);
  const plan = s.schedule();
  assert.equal(plan.entries.length, 4, "all four run at once");
  assert.equal(bm.numUsedBlocks, 4, "one block each for a 3-token prompt");
  finishStep(s, plan);
  assert.equal(s.schedule().entries.length, 4);
});

Deno.test("scheduler: decodes go first; a long prompt is chunked under the token budget", () => {
  const { s } = make({ numBlocks: 64, opts: { maxNumBatchedTokens: 8 } });
  const a = new Seq(1, [1, 2], 20, 32);
  s.enqueue(a);
  finishStep(s, s.schedule()); // a is now decoding
  const b = new Seq(2, range(10, 17), 4, 32);
  s.enqueue(b);
  let plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 2, 1, 0, true], [2, 0, 7, 0, false]]);
  assert.equal(plan.numTokens, 8);
  finishStep(s, plan);
  plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 3, 1, 0, true], [2, 7, 7, 0, false]], "a keeps decoding while b prefills");
  finishStep(s, plan);
  plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 4, 1, 0, true], [2, 14, 3, 0, true]], "the last chunk samples");
  finishStep(s, plan);
  assert.deepEqual(shape(s.schedule()), [[1, 5, 1, 0, true], [2, 17, 1, 0, true]]);
});

Deno.test("scheduler: drafts come from the budget left after one token per decode and a prefill chunk", () => {
  const { s } = make({ numBlocks: 64, opts: { maxNumBatchedTokens: 8, maxNumSeqs: 3 } });
  const a = new Seq(1, [1, 2], 20, 32);
  const b = new Seq(2, [3, 4], 20, 32);
  s.enqueue(a);
  s.enqueue(b);
  finishStep(s, s.schedule());
  const asked: number[][] = [];
  const plan = s.schedule((q, most) => (asked.push([q.id, most]), 5));
  assert.deepEqual(shape(plan), [[1, 2, 1, 5, true], [2, 2, 1, 1, true]]);
  assert.deepEqual(asked, [[1, 6], [2, 1]], "8 tokens: a keeps one for b; b gets what is left");
  // Re-plan from the same state (nothing was committed): a waiting prompt keeps one token of the budget.
  const { s: t } = make({ numBlocks: 64, opts: { maxNumBatchedTokens: 8, maxNumSeqs: 3 } });
  const c = new Seq(1, [1, 2], 20, 32);
  t.enqueue(c);
  finishStep(t, t.schedule());
  t.enqueue(new Seq(2, range(0, 9), 4, 32));
  assert.deepEqual(shape(t.schedule(() => 10)), [[1, 2, 1, 6, true], [2, 0, 1, 0, false]]);
  // With every slot taken nothing can be admitted, so no token is kept back for the waiting prompt.
  const { s: u } = make({ numBlocks: 64, opts: { maxNumBatchedTokens: 8, maxNumSeqs: 1 } });
  u.enqueue(new Seq(1, [1, 2], 20, 32));
  finishStep(u, u.schedule());
  u.enqueue(new Seq(2, range(0, 9), 4, 32));
  assert.deepEqual(shape(u.schedule(() => 10)), [[1, 2, 1, 7, true]]);
  // No draft room at all: the proposer is not asked.
  const { s: w } = make({ numBlocks: 64, opts: { maxNumBatchedTokens: 2, maxNumSeqs: 2 } });
  w.enqueue(new Seq(1, [1], 20, 32));
  w.enqueue(new Seq(2, [2], 20, 32));
  finishStep(w, w.schedule());
  assert.deepEqual(shape(w.schedule(() => assert.fail("asked"))), [[1, 1, 1, 0, true], [2, 1, 1, 0, true]]);
});

Deno.test("scheduler: drafts never run past the context length", () => {
  const { s } = make({ numBlocks: 64, opts: { maxModelLen: 32 } });
  const a = new Seq(1, range(0, 29), 3, 32);
  s.enqueue(a);
  finishStep(s, s.schedule());
  assert.equal(a.length, 30);
  assert.deepEqual(shape(s.schedule(() => 4)), [[1, 29, 1, 2, true]], "positions 29, 30, 31 only");
  const { s: t } = make({ numBlocks: 64 });
  t.enqueue(new Seq(1, [1, 2], 3, 32));
  finishStep(t, t.schedule());
  assert.deepEqual(shape(t.schedule(() => NaN)), [[1, 2, 1, 0, true]], "a nonsense answer asks for none");
});

Deno.test("scheduler: the newest running sequence is preempted when blocks run out, then recomputed", () => {
  // 8 blocks of 4 = one 32-token context. a's 15 tokens take 4 blocks, b's 11 take 3 (leaving 1, kept for a).
  const { s, bm } = make({ numBlocks: 8, opts: { maxNumBatchedTokens: 64 } });
  const a = new Seq(1, range(0, 15), 17, 32);
  const b = new Seq(2, range(50, 11), 17, 32);
  s.enqueue(a);
  s.enqueue(b);
  let plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 0, 15, 0, true], [2, 0, 11, 0, true]]);
  finishStep(s, plan);
  assert.equal(bm.numFreeBlocks, 1);
  plan = s.schedule(); // positions 15 and 11 still fit the blocks they have
  assert.deepEqual(shape(plan), [[1, 15, 1, 0, true], [2, 11, 1, 0, true]]);
  finishStep(s, plan);
  plan = s.schedule(); // a's position 16 takes the last block; b's 12 finds none: b, the newest, gives its blocks back
  assert.deepEqual(shape(plan), [[1, 16, 1, 0, true]]);
  assert.deepEqual(plan.preempted.map((x) => x.id), [2]);
  assert.deepEqual(s.waiting.map((x) => x.id), [2]);
  assert.equal(b.computedLength, 0);
  assert.equal(b.length, 13, "b keeps its generated tokens");
  assert.equal(bm.numFreeBlocks, 3);
  assert.equal(s.stats().preemptions, 1);
  const generated = [...b.tokens.subarray(11, 13)];
  finishStep(s, plan);
  plan = s.schedule(); // no admission while a needs the blocks a newcomer would leave
  assert.deepEqual(shape(plan), [[1, 17, 1, 0, true]]);
  finishStep(s, plan);
  s.remove(a); // a finishes; b is readmitted and recomputes prompt + generated tokens in one chunk
  plan = s.schedule();
  assert.deepEqual(shape(plan), [[2, 0, 13, 0, true]]);
  assert.deepEqual([...b.tokens.subarray(11, 13)], generated);
  finishStep(s, plan);
  assert.equal(b.length, 14);
});

Deno.test("scheduler: a prefill chunk shrinks to the free blocks; a decode then preempts the prefilling newest", () => {
  const { s, bm } = make({ numBlocks: 8, opts: { maxNumBatchedTokens: 9, maxNumSeqs: 2 } });
  const a = new Seq(1, range(0, 9), 20, 32);
  const b = new Seq(2, range(40, 30), 2, 32);
  s.enqueue(a);
  finishStep(s, s.schedule()); // a: 3 blocks
  s.enqueue(b);
  let plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 9, 1, 0, true], [2, 0, 8, 0, false]]);
  finishStep(s, plan);
  plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 10, 1, 0, true], [2, 8, 8, 0, false]]);
  assert.equal(bm.numFreeBlocks, 1);
  finishStep(s, plan);
  plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 11, 1, 0, true], [2, 16, 4, 0, false]], "one free block: a 4-token chunk");
  assert.equal(bm.numFreeBlocks, 0);
  finishStep(s, plan);
  plan = s.schedule(); // a's position 12 needs a block: b, the newest, gives its 5 back
  assert.deepEqual(shape(plan), [[1, 12, 1, 0, true]]);
  assert.deepEqual(plan.preempted, [b]);
  assert.equal(b.computedLength, 0);
  assert.deepEqual(s.waiting, [b]);
  assert.equal(bm.numFreeBlocks, 4);
});

Deno.test("scheduler: prefix-cache hits skip prefill and are reported once per request", () => {
  let clock = 0;
  const { s, bm } = make({ numBlocks: 32, prefix: true, opts: { now: () => clock } });
  const shared = range(200, 12);
  const a = new Seq(1, [...shared, 1, 2], 4, 32);
  s.enqueue(a);
  clock = 5;
  finishStep(s, s.schedule());
  const b = new Seq(2, [...shared, 3], 4, 32);
  s.enqueue(b);
  clock = 12;
  const plan = s.schedule();
  assert.deepEqual(shape(plan), [[1, 14, 1, 0, true], [2, 12, 1, 0, true]]);
  assert.equal(b.cachedPromptTokens, 12);
  assert.equal(a.cachedPromptTokens, 0);
  assert.deepEqual(bm.blockTable(2).slice(0, 3), bm.blockTable(1).slice(0, 3));
  const st = s.stats();
  assert.equal(st.prefixHitTokens, 12);
  assert.equal(st.prefixQueriedTokens, 14 + 13);
  assert.equal(st.admitted, 2);
  assert.equal(st.queueTimeMs, 5 + 7);
  assert.equal(st.maxQueueTimeMs, 7);
  assert.equal(st.blocksTotal, 32);
  assert.equal(st.blocksInUse, 4 + 1);
});

Deno.test("scheduler: a waiting head that does not fit blocks those behind it (FIFO)", () => {
  const { s } = make({ numBlocks: 8, opts: { maxNumBatchedTokens: 64, maxNumSeqs: 4 } });
  const a = new Seq(1, range(0, 20), 4, 32); // 5 blocks
  const b = new Seq(2, range(0, 16), 4, 32); // 4 blocks: does not fit beside a
  const c = new Seq(3, [1], 4, 32); // would fit
  for (const q of [a, b, c]) s.enqueue(q);
  const plan = s.schedule();
  assert.deepEqual(plan.entries.map((e) => e.seq.id), [1]);
  assert.deepEqual(s.waiting.map((x) => x.id), [2, 3]);
  finishStep(s, plan);
  s.remove(a);
  assert.deepEqual(s.schedule().entries.map((e) => e.seq.id), [2, 3]);
});

Deno.test("scheduler: a newcomer must leave one free block per running sequence", () => {
  const { s, bm } = make({ numBlocks: 8, opts: { maxNumSeqs: 4 } });
  const a = new Seq(1, range(0, 12), 10, 32); // 3 blocks
  const b = new Seq(2, range(0, 12), 10, 32); // 3 blocks: 6 in use, 2 free, 1 kept for a
  const c = new Seq(3, range(0, 4), 10, 32); // 1 block: 2 free, 2 kept for a and b
  s.enqueue(a);
  s.enqueue(b);
  s.enqueue(c);
  let plan = s.schedule();
  assert.deepEqual(plan.entries.map((e) => e.seq.id), [1, 2]);
  assert.equal(bm.numFreeBlocks, 2);
  finishStep(s, plan);
  plan = s.schedule(); // a and b cross into their fourth blocks
  assert.deepEqual(plan.entries.map((e) => e.seq.id), [1, 2]);
  assert.equal(plan.preempted.length, 0);
  assert.deepEqual(s.waiting, [c]);
});

Deno.test("scheduler: commit refuses a computed length beyond the known tokens or below the last one", () => {
  const { s } = make({ numBlocks: 16 });
  const a = new Seq(1, [1, 2, 3], 4, 32);
  s.enqueue(a);
  s.schedule();
  assert.throws(() => s.commit(a, 4), RangeError);
  s.commit(a, 3);
  assert.throws(() => s.commit(a, 2), RangeError);
});

/**
 * A toy model run against a fake paged KV pool: the next token is a hash of the KV contents at positions 0..p, read
 * through the block table. If the scheduler or block manager ever served a block holding other tokens (bad prefix
 * hit, shared block overwritten, stale block after preemption), the generated text differs from the reference,
 * which hashes the sequence's own tokens.
 */
const V = 5;
function nextToken(read: (p: number) => number, p: number): number {
  let h = 17;
  for (let i = 0; i <= p; i++) h = (Math.imul(h, 31) + read(i) + 1) | 0;
  return ((h >>> 0) % V) + 1;
}

interface Req {
  prompt: number[];
  maxTokens: number;
  arrive: number;
  abortAt: number | undefined;
}

function reference(r: Req): number[] {
  const t = [...r.prompt];
  while (t.length - r.prompt.length < r.maxTokens) t.push(nextToken((i) => t[i]!, t.length - 1));
  return t.slice(r.prompt.length);
}

function simulate(
  reqs: readonly Req[],
  cfg: {
    numBlocks: number;
    blockSize: number;
    budget: number;
    maxNumSeqs: number;
    drafts: number;
    prefix: boolean;
    keyBits: number;
    /** A sliding-window pool (0: none): its KV is simulated too, and every fed token's window checked in it. */
    window?: number;
    slidingBlocks?: number;
  },
) {
  const maxModelLen = 24;
  const W = cfg.window ?? 0;
  const bm = new BlockManager({
    numBlocks: cfg.numBlocks,
    blockSize: cfg.blockSize,
    enablePrefixCache: cfg.prefix,
    keyBits: cfg.keyBits,
    ...(W > 0 ? { slidingWindow: W, numSlidingBlocks: cfg.slidingBlocks ?? 0 } : {}),
  });
  const s = new Scheduler<Seq>({
    maxNumSeqs: cfg.maxNumSeqs,
    maxQueue: 1000,
    maxNumBatchedTokens: cfg.budget,
    maxModelLen,
  }, bm);
  const kv = new Int32Array(cfg.numBlocks * cfg.blockSize).fill(-1);
  const slot = (seq: Seq, p: number) =>
    bm.blockTable(seq.id)[Math.floor(p / cfg.blockSize)]! * cfg.blockSize +
    (p % cfg.blockSize);
  const kvw = new Int32Array((cfg.slidingBlocks ?? 0) * cfg.blockSize).fill(-1);
  const slotW = (seq: Seq, p: number) => {
    const b = bm.slidingBlockTable(seq.id)[Math.floor(p / cfg.blockSize)]!;
    assert.ok(b >= 0, `seq ${seq.id}: no sliding block for position ${p}`);
    return b * cfg.blockSize + (p % cfg.blockSize);
  };
  const seqs = reqs.map((r, i) => new Seq(i + 1, r.prompt, r.maxTokens, maxModelLen));
  const finished = new Set<Seq>();
  const outputs = new Map<number, number[]>();
  let step = 0;
  let preemptions = 0;
  for (; step < 2000; step++) {
    reqs.forEach((r, i) => {
      if (r.arrive === step && !finished.has(seqs[i]!)) s.enqueue(seqs[i]!);
      if (r.abortAt === step && !finished.has(seqs[i]!)) {
        s.remove(seqs[i]!);
        finished.add(seqs[i]!);
      }
    });
    if (finished.size === seqs.length) break;
    const oldest = s.running[0];
    const oldestComputed = oldest?.computedLength ?? 0;
    const drafts = new Map<Seq, number[]>();
    const plan = s.schedule((seq) => {
      // Drafts: the right continuation, with a wrong token in the middle for odd ids.
      const d: number[] = [];
      for (let k = 0; k < cfg.drafts; k++) {
        const t = [...seq.tokens.subarray(0, seq.length), ...d];
        d.push(seq.id % 2 === 1 && k === 1 ? 0 : nextToken((i) => t[i]!, t.length - 1));
      }
      drafts.set(seq, d);
      return d.length;
    });
    preemptions += plan.preempted.length;
    assert.ok(plan.numTokens <= cfg.budget);
    assert.ok(s.running.length <= cfg.maxNumSeqs);
    assert.equal(plan.numTokens, plan.entries.reduce((n, e) => n + e.count + e.drafts, 0));
    for (const p of plan.preempted) assert.ok(!plan.entries.some((e) => e.seq === p));
    if (oldest !== undefined && s.running[0] === oldest) {
      assert.ok(plan.entries.some((e) => e.seq === oldest), "the oldest running sequence advances every step");
    }
    assert.ok(oldest === undefined || s.running.includes(oldest) || s.running.length === 0 || oldestComputed >= 0);
    // Block-table invariants: a block in two tables is a cached prefix block below both computed lengths.
    const holders = new Map<number, number>();
    for (const seq of s.running) {
      bm.blockTable(seq.id).forEach((b, j) => {
        holders.set(b, (holders.get(b) ?? 0) + 1);
        if (bm.isCached(b)) assert.ok((j + 1) * cfg.blockSize <= seq.computedLength);
      });
    }
    for (const [b, n] of holders) {
      assert.equal(bm.refCount(b), n);
      if (n > 1) assert.ok(bm.isCached(b));
    }
    assert.equal(bm.numUsedBlocks, holders.size);
    assert.equal(bm.numUsedBlocks + bm.numFreeBlocks, cfg.numBlocks);
    if (W > 0) {
      assert.equal(bm.numUsedSlidingBlocks + bm.numFreeSlidingBlocks, cfg.slidingBlocks);
      // Between steps a sequence holds its window's blocks and those past its computed length, no more.
      for (const seq of s.running) {
        const from = Math.floor(Math.max(0, seq.computedLength - W + 1) / cfg.blockSize);
        assert.equal(bm.slidingBlocksHeld(seq.id), bm.blockTable(seq.id).length - from, `seq ${seq.id} sliding`);
      }
    }
    // "Run" the step: check the cached prefix, write fed tokens, sample.
    for (const e of plan.entries) {
      const seq = e.seq;
      assert.equal(e.start, seq.computedLength);
      assert.ok(bm.blockTable(seq.id).length * cfg.blockSize >= e.start + e.count + e.drafts);
      assert.ok(e.start + e.count + e.drafts <= maxModelLen);
      for (let p = 0; p < e.start; p++) assert.equal(kv[slot(seq, p)], seq.tokens[p], `seq ${seq.id} KV at ${p}`);
      const fed = [...seq.tokens.subarray(e.start, e.start + e.count), ...(drafts.get(seq) ?? []).slice(0, e.drafts)];
      fed.forEach((t, i) => kv[slot(seq, e.start + i)] = t);
      if (W === 0) continue;
      // The first fed token's window (the later ones' start later) holds the sequence's tokens in the sliding pool.
      for (let p = Math.max(0, e.start - W + 1); p < e.start; p++) {
        assert.equal(kvw[slotW(seq, p)], seq.tokens[p], `seq ${seq.id} sliding KV at ${p}`);
      }
      fed.forEach((t, i) => kvw[slotW(seq, e.start + i)] = t);
    }
    for (const e of plan.entries) {
      const seq = e.seq;
      const read = (p: number) => kv[slot(seq, p)]!;
      if (!e.sample) {
        s.commit(seq, e.start + e.count);
        continue;
      }
      const d = (drafts.get(seq) ?? []).slice(0, e.drafts);
      let last = e.start + e.count - 1;
      const produced: number[] = [];
      for (;;) {
        const t = nextToken(read, last);
        produced.push(t);
        const k = produced.length - 1;
        if (k < d.length && d[k] === t) last++;
        else break;
      }
      let kept = 0;
      for (const t of produced) {
        if (seq.generated >= seq.maxTokens) break;
        seq.tokens[seq.length++] = t;
        kept++;
      }
      s.commit(seq, Math.min(e.start + e.count + produced.length - 1, seq.length - (kept > 0 ? 1 : 0)));
      if (seq.generated >= seq.maxTokens) {
        outputs.set(seq.id, [...seq.tokens.subarray(seq.promptLength, seq.length)]);
        s.remove(seq);
        finished.add(seq);
      }
    }
  }
  assert.ok(finished.size === seqs.length, `all requests finish (stuck after ${step} steps)`);
  assert.equal(bm.numUsedBlocks, 0);
  assert.equal(bm.numUsedSlidingBlocks, 0);
  return { outputs, preemptions, hits: bm.hitTokens };
}

Deno.test("scheduler: random workloads finish with reference outputs under preemption, prefix hits and drafts (fuzz)", () => {
  let preempted = 0;
  let hits = 0;
  const token = fc.integer({ min: 1, max: 3 });
  const req = fc.record({
    prefix: fc.nat(2),
    tail: fc.array(token, { minLength: 1, maxLength: 8 }),
    maxTokens: fc.integer({ min: 1, max: 10 }),
    arrive: fc.nat(6),
    abortAt: fc.option(fc.nat(30), { nil: undefined }),
  });
  const cfg = fc.record({
    blockSize: fc.integer({ min: 1, max: 5 }),
    extraBlocks: fc.nat(6),
    budget: fc.integer({ min: 4, max: 24 }),
    maxNumSeqs: fc.integer({ min: 1, max: 4 }),
    drafts: fc.nat(3),
    prefix: fc.boolean(),
    keyBits: fc.constantFrom(0, 2, 53),
  });
  fc.assert(
    fc.property(fc.array(req, { minLength: 1, maxLength: 8 }), cfg, (raw, c) => {
      const prefixes = [[], [1, 2, 3, 1, 2], [1, 2, 3, 3, 3, 1, 1]];
      const reqs: Req[] = raw.map((r) => ({
        prompt: [...prefixes[r.prefix]!, ...r.tail],
        maxTokens: Math.min(r.maxTokens, 24 - prefixes[r.prefix]!.length - r.tail.length),
        arrive: r.arrive,
        abortAt: r.abortAt,
      }));
      const numBlocks = Math.ceil(24 / c.blockSize) + c.extraBlocks;
      const budget = Math.max(c.budget, c.maxNumSeqs);
      const out = simulate(reqs, { ...c, numBlocks, budget });
      preempted += out.preemptions;
      hits += out.hits;
      reqs.forEach((r, i) => {
        const got = out.outputs.get(i + 1);
        if (got !== undefined) assert.deepEqual(got, reference(r), `request ${i + 1}`);
        else assert.ok(r.abortAt !== undefined, `request ${i + 1} finished without output`);
      });
    }),
    { numRuns: 400 },
  );
  assert.ok(preempted > 0, "the fuzz reached preemption");
  assert.ok(hits > 0, "the fuzz reached prefix hits");
});

Deno.test("scheduler: with a sliding-window pool, every fed token's window is in it under preemption, prefix hits and drafts (fuzz)", () => {
  let preempted = 0;
  let hits = 0;
  const token = fc.integer({ min: 1, max: 3 });
  const req = fc.record({
    prefix: fc.nat(2),
    tail: fc.array(token, { minLength: 1, maxLength: 8 }),
    maxTokens: fc.integer({ min: 1, max: 10 }),
    arrive: fc.nat(6),
    abortAt: fc.option(fc.nat(30), { nil: undefined }),
  });
  const cfg = fc.record({
    blockSize: fc.integer({ min: 1, max: 5 }),
    extraBlocks: fc.nat(6),
    budget: fc.integer({ min: 4, max: 24 }),
    maxNumSeqs: fc.integer({ min: 1, max: 4 }),
    drafts: fc.nat(3),
    prefix: fc.boolean(),
    keyBits: fc.constantFrom(0, 2, 53),
    window: fc.integer({ min: 1, max: 12 }),
    extraSliding: fc.nat(5),
  });
  fc.assert(
    fc.property(fc.array(req, { minLength: 1, maxLength: 8 }), cfg, (raw, c) => {
      const prefixes = [[], [1, 2, 3, 1, 2], [1, 2, 3, 3, 3, 1, 1]];
      const reqs: Req[] = raw.map((r) => ({
        prompt: [...prefixes[r.prefix]!, ...r.tail],
        maxTokens: Math.min(r.maxTokens, 24 - prefixes[r.prefix]!.length - r.tail.length),
        arrive: r.arrive,
        abortAt: r.abortAt,
      }));
      const numBlocks = Math.ceil(24 / c.blockSize) + c.extraBlocks;
      const budget = Math.max(c.budget, c.maxNumSeqs);
      const slidingBlocks = Math.ceil(c.window / c.blockSize) + 1 + c.extraSliding;
      const out = simulate(reqs, { ...c, numBlocks, budget, slidingBlocks });
      preempted += out.preemptions;
      hits += out.hits;
      reqs.forEach((r, i) => {
        const got = out.outputs.get(i + 1);
        if (got !== undefined) assert.deepEqual(got, reference(r), `request ${i + 1}`);
        else assert.ok(r.abortAt !== undefined, `request ${i + 1} finished without output`);
      });
    }),
    { numRuns: 300 },
  );
  assert.ok(preempted > 0, "the fuzz reached preemption");
  assert.ok(hits > 0, "the fuzz reached prefix hits");
});
