import assert from "node:assert/strict";
import { QueueFullError } from "../../engine/engine.ts";
import { KvCacheBudget } from "../../engine/kv_cache.ts";
import { Scheduler } from "../../engine/scheduler.ts";

const seq = (id: number, reserveTokens = 10, promptLength = 4) => ({ id, reserveTokens, promptLength });

Deno.test("scheduler: admits up to maxNumSeqs in FIFO order, then queues", () => {
  const s = new Scheduler({ maxNumSeqs: 2, maxQueue: 2, maxPrefillTokens: 1000 }, new KvCacheBudget(1000));
  for (let i = 1; i <= 4; i++) s.enqueue(seq(i));
  assert.deepEqual(s.admit().map((x) => x.id), [1, 2]);
  assert.deepEqual(s.running.map((x) => x.id), [1, 2]);
  assert.deepEqual(s.waiting.map((x) => x.id), [3, 4]);
  s.remove(s.running[0]!);
  assert.deepEqual(s.admit().map((x) => x.id), [3]);
  assert.deepEqual(s.running.map((x) => x.id), [2, 3], "running order is stable: newcomers go last");
});

Deno.test("scheduler: queue full throws QueueFullError, counting free slots as not waiting", () => {
  const s = new Scheduler({ maxNumSeqs: 1, maxQueue: 1, maxPrefillTokens: 1000 }, new KvCacheBudget(1000));
  s.enqueue(seq(1)); // takes the free slot at the next admit
  s.enqueue(seq(2)); // the one queue place
  assert.throws(() => s.enqueue(seq(3)), QueueFullError);
  s.admit();
  assert.throws(() => s.enqueue(seq(3)), QueueFullError);
  const zero = new Scheduler({ maxNumSeqs: 1, maxQueue: 0, maxPrefillTokens: 1000 }, new KvCacheBudget(1000));
  zero.enqueue(seq(1));
  assert.throws(() => zero.enqueue(seq(2)), QueueFullError);
});

Deno.test("scheduler: KV budget blocks admission head-of-line and is returned on remove", () => {
  const kv = new KvCacheBudget(25);
  const s = new Scheduler({ maxNumSeqs: 8, maxQueue: 8, maxPrefillTokens: 1000 }, kv);
  s.enqueue(seq(1, 10));
  s.enqueue(seq(2, 10));
  s.enqueue(seq(3, 10));
  s.enqueue(seq(4, 1));
  assert.deepEqual(s.admit().map((x) => x.id), [1, 2], "3 does not fit and 4 may not overtake it");
  assert.equal(kv.reserved, 20);
  kv.setUsed(1, 7);
  assert.equal(kv.usage, 7 / 25);
  s.remove(s.running[0]!);
  assert.equal(kv.used, 0);
  assert.deepEqual(s.admit().map((x) => x.id), [3, 4]);
  assert.equal(s.fits(seq(9, 26)), false);
});

Deno.test("scheduler: prefill budget limits padded prompt tokens per step but always admits one", () => {
  const s = new Scheduler({ maxNumSeqs: 8, maxQueue: 8, maxPrefillTokens: 100 }, new KvCacheBudget(10000));
  s.enqueue(seq(1, 300, 200));
  s.enqueue(seq(2, 20, 10));
  assert.deepEqual(s.admit().map((x) => x.id), [1]);
  for (let i = 3; i <= 8; i++) s.enqueue(seq(i, 40, 30));
  assert.deepEqual(s.admit().map((x) => x.id), [2, 3, 4], "4 rows × 30 would be 120 > 100");
});

Deno.test("kv budget: setUsed tracks growth and rollback; over-reservation is refused", () => {
  const kv = new KvCacheBudget(100);
  kv.reserve(1, 50);
  kv.setUsed(1, 30);
  kv.setUsed(1, 26);
  assert.equal(kv.used, 26);
  assert.throws(() => kv.setUsed(1, 51));
  assert.throws(() => kv.reserve(2, 51));
  kv.release(1);
  assert.equal(kv.reserved, 0);
});
