/**
 * Continuous-batching admission: a bounded FIFO waiting queue feeding a running set of at most `maxNumSeqs`
 * sequences. Sequences join and leave the running set between engine steps; the scheduler itself is synchronous and
 * holds no model state, so it is tested without a backend.
 *
 * Invariants:
 * - A sequence is admitted only if its worst-case cache need fits the KV budget (see KvCacheBudget), so running
 *   sequences never need preemption.
 * - Admission is strictly FIFO: a waiting sequence that does not fit blocks those behind it (no starvation).
 * - `enqueue` throws QueueFullError synchronously when more than `maxQueue` sequences would be waiting beyond the
 *   free running slots, so the HTTP layer can answer 429 before sending a byte.
 */
import { QueueFullError } from "./engine.ts";
import type { KvCacheBudget } from "./kv_cache.ts";

export interface Schedulable {
  readonly id: number;
  /** Worst-case cached tokens: min(prompt + max new tokens, context length). */
  readonly reserveTokens: number;
  readonly promptLength: number;
}

export interface SchedulerOptions {
  readonly maxNumSeqs: number;
  readonly maxQueue: number;
  /** Upper bound on padded prefill tokens (rows × longest prompt) admitted in one step; one is always admitted. */
  readonly maxPrefillTokens: number;
}

export class Scheduler<T extends Schedulable> {
  readonly options: SchedulerOptions;
  readonly #kv: KvCacheBudget;
  #waiting: T[] = [];
  #running: T[] = [];

  constructor(options: SchedulerOptions, kv: KvCacheBudget) {
    if (!(options.maxNumSeqs >= 1)) throw new RangeError("maxNumSeqs must be at least 1");
    if (!(options.maxQueue >= 0)) throw new RangeError("maxQueue must be non-negative");
    this.options = options;
    this.#kv = kv;
  }

  get waiting(): readonly T[] {
    return this.#waiting;
  }

  /** In admission order; the order is stable so the backend can keep its batch layout across steps. */
  get running(): readonly T[] {
    return this.#running;
  }

  get idle(): boolean {
    return this.#waiting.length === 0 && this.#running.length === 0;
  }

  /** Whether a sequence of this size could ever be admitted. */
  fits(seq: Schedulable): boolean {
    return seq.reserveTokens <= this.#kv.capacity;
  }

  enqueue(seq: T): void {
    const freeSlots = Math.max(0, this.options.maxNumSeqs - this.#running.length);
    if (this.#waiting.length - freeSlots >= this.options.maxQueue) {
      throw new QueueFullError(`waiting queue is full (${this.options.maxQueue} requests)`);
    }
    this.#waiting.push(seq);
  }

  /** Moves waiting sequences into the running set while slots, KV budget and the prefill budget allow. */
  admit(): T[] {
    const admitted: T[] = [];
    let longest = 0;
    while (this.#waiting.length > 0 && this.#running.length < this.options.maxNumSeqs) {
      const next = this.#waiting[0]!;
      if (!this.#kv.canReserve(next.reserveTokens)) break;
      const padded = (admitted.length + 1) * Math.max(longest, next.promptLength);
      if (admitted.length > 0 && padded > this.options.maxPrefillTokens) break;
      this.#waiting.shift();
      this.#kv.reserve(next.id, next.reserveTokens);
      this.#running.push(next);
      admitted.push(next);
      longest = Math.max(longest, next.promptLength);
    }
    return admitted;
  }

  /** Removes a sequence wherever it is and returns its KV reservation. */
  remove(seq: T): void {
    const r = this.#running.indexOf(seq);
    if (r >= 0) {
      this.#running.splice(r, 1);
      this.#kv.release(seq.id);
      return;
    }
    const w = this.#waiting.indexOf(seq);
    if (w >= 0) this.#waiting.splice(w, 1);
  }
}
