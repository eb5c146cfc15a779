/**
 * Continuous batching in tokens and blocks: a bounded FIFO waiting queue feeding at most `maxNumSeqs` running
 * sequences, one plan per engine step under a budget of `maxNumBatchedTokens` fed tokens. Synchronous and free of
 * model state; it knows tokens and KV blocks (through the BlockManager), nothing of any backend's layout.
 *
 * A step's plan, in this order:
 * 1. decodes — every running sequence with one unfed token feeds it plus drafts (1 + drafts tokens), oldest first;
 *    drafts only from budget that no later decode or waiting prefill chunk needs;
 * 2. prefill chunks of running sequences still short of their known tokens, oldest first, from the budget left;
 * 3. admission of waiting sequences, strictly FIFO, while slots, budget and blocks allow (none in a step that
 *    preempted). A long prompt is thus fed in chunks and never stalls running streams. A newcomer must leave one
 *    free block per running sequence, so decodes crossing into a new block do not at once preempt it (with nothing
 *    running the head always fits).
 *
 * Invariants:
 * - Blocks are taken as a sequence's fed positions grow (never its worst case). When a sequence cannot get a block
 *   for even one token, the newest running sequence is preempted: its blocks go back, its computed length drops to 0
 *   and it goes to the front of the waiting queue, keeping its tokens (prompt + generated), which are recomputed on
 *   readmission (prefix-cache hits included). The oldest running sequence is never preempted for another, so every
 *   step advances it; with ≥ ceil(maxModelLen / blockSize) blocks one sequence always fits, so no request that fits
 *   the context fails for lack of cache.
 * - A running sequence has 1 ≤ length − computedLength between steps: every known token but the unfed ones is in KV.
 * - `enqueue` throws QueueFullError synchronously when more than `maxQueue` sequences would wait beyond the free
 *   running slots, so the HTTP layer can answer 429 before sending a byte.
 */
import type { BlockManager } from "./block_manager.ts";
import { QueueFullError } from "./engine.ts";

/** What the scheduler needs of a sequence; the engine's sequence implements it. */
export interface Schedulable {
  /** Stable while the sequence lives, never reused; also its BlockManager id. */
  readonly id: number;
  /** Known tokens: the prompt, then generated tokens; `tokens[0 .. length)`. */
  readonly tokens: ArrayLike<number>;
  readonly length: number;
  readonly promptLength: number;
  /** Leading tokens whose KV is computed. Written by the scheduler only (admission, commit, preemption). */
  computedLength: number;
  /** Prompt tokens served from the prefix cache at first admission. Written by the scheduler only. */
  cachedPromptTokens: number;
}

export interface SchedulerOptions {
  readonly maxNumSeqs: number;
  readonly maxQueue: number;
  /** Fed tokens per step (drafts included); at least maxNumSeqs, so every running decode can feed each step. */
  readonly maxNumBatchedTokens: number;
  /** Context length; the block pool must hold one sequence of this length. */
  readonly maxModelLen: number;
  /** Clock for queue times, in ms (default performance.now). */
  readonly now?: () => number;
}

/** One sequence's share of a step. */
export interface StepEntry<T> {
  readonly seq: T;
  /** First fed position = computed length before the step. */
  readonly start: number;
  /** Known tokens fed: `seq.tokens[start .. start + count)`. */
  readonly count: number;
  /** Draft tokens fed after them (positions start + count ..); the engine supplies them. */
  readonly drafts: number;
  /** Whether this entry reaches the end of the known tokens, so the step samples it. */
  readonly sample: boolean;
}

export interface StepPlan<T> {
  /** Decodes, then prefill chunks of running sequences, then newly admitted sequences. */
  readonly entries: readonly StepEntry<T>[];
  /** Sequences that gave their blocks back this step (now at the front of the waiting queue, newest last). */
  readonly preempted: readonly T[];
  /** Σ count + drafts over the entries. */
  readonly numTokens: number;
}

/** A step being planned: its entries so far, who was preempted, and the fed tokens still free. */
interface PlanInProgress<T> {
  readonly entries: StepEntry<T>[];
  readonly preempted: T[];
  budget: number;
}

export interface SchedulerStats {
  readonly preemptions: number;
  /** Sequences admitted for the first time, and the total / largest time they waited, in ms. */
  readonly admitted: number;
  readonly queueTimeMs: number;
  readonly maxQueueTimeMs: number;
  readonly prefixQueriedTokens: number;
  readonly prefixHitTokens: number;
  readonly blocksInUse: number;
  readonly blocksTotal: number;
}

export class Scheduler<T extends Schedulable> {
  readonly options: SchedulerOptions;
  readonly blocks: BlockManager;
  readonly #now: () => number;
  #waiting: T[] = [];
  #running: T[] = [];
  /** Enqueue time of sequences not yet admitted once. */
  readonly #arrival = new Map<number, number>();
  #preemptions = 0;
  #admitted = 0;
  #queueTimeMs = 0;
  #maxQueueTimeMs = 0;

  constructor(options: SchedulerOptions, blocks: BlockManager) {
    const { maxNumSeqs, maxQueue, maxNumBatchedTokens, maxModelLen } = options;
    if (!(Number.isInteger(maxNumSeqs) && maxNumSeqs >= 1)) throw new RangeError("maxNumSeqs must be at least 1");
    if (!(maxQueue >= 0)) throw new RangeError("maxQueue must be non-negative");
    if (!(Number.isInteger(maxModelLen) && maxModelLen >= 1)) throw new RangeError("maxModelLen must be at least 1");
    if (!(Number.isInteger(maxNumBatchedTokens) && maxNumBatchedTokens >= maxNumSeqs)) {
      throw new RangeError(`maxNumBatchedTokens must be an integer ≥ maxNumSeqs (${maxNumSeqs})`);
    }
    const need = Math.ceil(maxModelLen / blocks.blockSize);
    if (blocks.numBlocks < need) {
      throw new RangeError(
        `KV pool has ${blocks.numBlocks} blocks; one ${maxModelLen}-token sequence needs ${need} of ${blocks.blockSize}`,
      );
    }
    // A sequence's next token sees back W − 1 positions: ceil(W / blockSize) + 1 sliding blocks at most.
    const window = blocks.slidingWindow;
    const needWin = window > 0 ? Math.min(need, Math.ceil(window / blocks.blockSize) + 1) : 0;
    if (blocks.numSlidingBlocks < needWin) {
      throw new RangeError(
        `sliding KV pool has ${blocks.numSlidingBlocks} blocks; one sequence's window of ${window} needs ${needWin}`,
      );
    }
    this.options = options;
    this.blocks = blocks;
    this.#now = options.now ?? (() => performance.now());
  }

  get waiting(): readonly T[] {
    return this.#waiting;
  }

  /** In admission order, oldest first (a readmitted sequence counts as newest). */
  get running(): readonly T[] {
    return this.#running;
  }

  get idle(): boolean {
    return this.#waiting.length === 0 && this.#running.length === 0;
  }

  stats(): SchedulerStats {
    return {
      preemptions: this.#preemptions,
      admitted: this.#admitted,
      queueTimeMs: this.#queueTimeMs,
      maxQueueTimeMs: this.#maxQueueTimeMs,
      prefixQueriedTokens: this.blocks.queriedTokens,
      prefixHitTokens: this.blocks.hitTokens,
      blocksInUse: this.blocks.numUsedBlocks,
      blocksTotal: this.blocks.numBlocks,
    };
  }

  /**
   * Queues a fresh sequence (1 ≤ length ≤ maxModelLen); throws QueueFullError when the queue is full, unless the
   * sequence belongs to a request already admitted (`admitted`).
   */
  enqueue(seq: T, admitted = false): void {
    if (!(seq.length >= 1 && seq.length <= this.options.maxModelLen)) {
      throw new RangeError(
        `sequence ${seq.id} has ${seq.length} tokens; the context length is ${this.options.maxModelLen}`,
      );
    }
    const freeSlots = Math.max(0, this.options.maxNumSeqs - this.#running.length);
    if (!admitted && this.#waiting.length - freeSlots >= this.options.maxQueue) {
      throw new QueueFullError(`waiting queue is full (${this.options.maxQueue} requests)`);
    }
    seq.computedLength = 0;
    seq.cachedPromptTokens = 0;
    this.#waiting.push(seq);
    this.#arrival.set(seq.id, this.#now());
  }

  /**
   * Plans one step and takes the blocks it needs. `wantDrafts(seq, most)` is asked, once per decode that may take any,
   * how many drafts (≤ `most`, which the budget and the context length allow) it would verify; the entry's `drafts`
   * may still be fewer when blocks run short. After the backend runs, call `commit` for every entry.
   */
  schedule(wantDrafts?: (seq: T, most: number) => number): StepPlan<T> {
    const plan: PlanInProgress<T> = { entries: [], preempted: [], budget: this.options.maxNumBatchedTokens };
    this.#planDecodes(plan, wantDrafts);
    this.#planPrefillChunks(plan);
    this.#admit(plan);
    return {
      entries: plan.entries,
      preempted: plan.preempted,
      numTokens: this.options.maxNumBatchedTokens - plan.budget,
    };
  }

  /**
   * One entry per running decode, oldest first, each with the drafts `wantDrafts` asks for as far as the budget
   * allows while keeping one token for every later decode and one for a prefill (when one is running or could be
   * admitted).
   */
  #planDecodes(plan: PlanInProgress<T>, wantDrafts: ((seq: T, most: number) => number) | undefined): void {
    const running = this.#running;
    const maxLen = this.options.maxModelLen;
    let decodes = 0;
    let prefills = 0;
    for (const seq of running) {
      const unfed = seq.length - seq.computedLength;
      if (unfed < 1) throw new Error(`scheduler: sequence ${seq.id} has no token to feed`);
      if (unfed === 1) decodes++;
      else prefills++;
    }
    const canAdmit = this.#waiting.length > 0 && running.length < this.options.maxNumSeqs;
    const prefillReserve = prefills > 0 || canAdmit ? 1 : 0;
    for (let i = 0; i < running.length && plan.budget > 0; i++) {
      const seq = running[i]!;
      if (seq.length - seq.computedLength !== 1) continue;
      decodes--;
      const start = seq.computedLength;
      const most = Math.max(0, Math.min(maxLen - seq.length, plan.budget - 1 - decodes - prefillReserve));
      const want = most > 0 && wantDrafts !== undefined ? Math.floor(wantDrafts(seq, most)) : 0;
      const drafts = want > 0 ? Math.min(want, most) : 0; // NaN asks for none
      const n = this.#room(plan, seq, start, 1 + drafts);
      if (n === 0) break; // it was the newest; everything older is planned
      plan.entries.push({ seq, start, count: 1, drafts: n - 1, sample: true });
      plan.budget -= n;
    }
  }

  /** The next chunk of each running prefill, oldest first, within what is left of the budget. */
  #planPrefillChunks(plan: PlanInProgress<T>): void {
    const running = this.#running;
    for (let i = 0; i < running.length && plan.budget > 0; i++) {
      const seq = running[i]!;
      const start = seq.computedLength;
      if (seq.length - start === 1) continue;
      const n = this.#room(plan, seq, start, Math.min(plan.budget, seq.length - start));
      if (n === 0) break;
      plan.entries.push({ seq, start, count: n, drafts: 0, sample: start + n === seq.length });
      plan.budget -= n;
    }
  }

  /**
   * Admits waiting sequences in FIFO order while the budget, the sequence limit and the pool allow (none in a step
   * that preempted), each with its first prefill chunk after the cached prefix.
   */
  #admit(plan: PlanInProgress<T>): void {
    const running = this.#running;
    while (
      plan.preempted.length === 0 && plan.budget > 0 && this.#waiting.length > 0 &&
      running.length < this.options.maxNumSeqs
    ) {
      const seq = this.#waiting[0]!;
      // One block kept free per running sequence, so the next decodes do not at once preempt the newcomer.
      const cached = this.blocks.allocatePrompt(seq.id, seq.tokens, seq.length, plan.budget, running.length);
      if (cached < 0) break; // FIFO: whoever is behind waits too
      this.#waiting.shift();
      running.push(seq);
      seq.computedLength = cached;
      this.#recordAdmission(seq, cached);
      this.blocks.assertWritable(seq.id, cached);
      // The first chunk is what allocatePrompt could hold (a sliding pool may cut it).
      const held = this.blocks.blockTable(seq.id).length * this.blocks.blockSize;
      const n = Math.min(plan.budget, seq.length - cached, held - cached);
      plan.entries.push({ seq, start: cached, count: n, drafts: 0, sample: cached + n === seq.length });
      plan.budget -= n;
    }
  }

  /** A first admission's queue time and cached prompt tokens (a preempted sequence coming back is not counted). */
  #recordAdmission(seq: T, cached: number): void {
    const arrived = this.#arrival.get(seq.id);
    if (arrived === undefined) return;
    this.#arrival.delete(seq.id);
    seq.cachedPromptTokens = Math.min(cached, seq.promptLength);
    const waited = this.#now() - arrived;
    this.#admitted++;
    this.#queueTimeMs += waited;
    this.#maxQueueTimeMs = Math.max(this.#maxQueueTimeMs, waited);
  }

  /** Sends the newest running sequence back to the front of the queue, dropping its entry and freeing its blocks. */
  #preempt(plan: PlanInProgress<T>, victim: T): void {
    const at = plan.entries.findIndex((e) => e.seq === victim);
    if (at >= 0) {
      const e = plan.entries[at]!;
      plan.budget += e.count + e.drafts;
      plan.entries.splice(at, 1);
    }
    this.#running.pop();
    this.blocks.free(victim.id);
    victim.computedLength = 0;
    this.#waiting.unshift(victim);
    plan.preempted.push(victim);
    this.#preemptions++;
  }

  /** Gives `seq` room for 1 ..= `most` tokens from `start`, preempting the newest; 0 when `seq` itself went. */
  #room(plan: PlanInProgress<T>, seq: T, start: number, most: number): number {
    const running = this.#running;
    for (;;) {
      const fits = this.blocks.maxTokensFor(seq.id) - start;
      if (fits >= 1) {
        const n = Math.min(most, fits);
        if (!this.blocks.ensureCapacity(seq.id, start + n)) throw new Error("scheduler: block accounting drifted");
        this.blocks.assertWritable(seq.id, start);
        return n;
      }
      const victim = running[running.length - 1]!;
      this.#preempt(plan, victim);
      if (victim === seq) return 0;
    }
  }

  /**
   * Records what a planned sequence keeps after the step: `computedLength` = start + count for a prefill chunk, and
   * start + 1 + accepted drafts for a decode (rejected drafts roll back by being left out). Append the step's
   * accepted tokens to the sequence first: `computedLength` may not exceed `length`. Newly full blocks join the
   * prefix cache, so commit before removing a finished sequence.
   */
  commit(seq: T, computedLength: number): void {
    if (!(Number.isInteger(computedLength) && computedLength >= seq.computedLength && computedLength <= seq.length)) {
      throw new RangeError(
        `scheduler: sequence ${seq.id} cannot go from ${seq.computedLength} to ${computedLength} computed tokens`,
      );
    }
    this.blocks.markComputed(seq.id, seq.tokens, computedLength);
    seq.computedLength = computedLength;
  }

  /** Removes a sequence wherever it is and gives its blocks back. */
  remove(seq: T): void {
    this.#arrival.delete(seq.id);
    const r = this.#running.indexOf(seq);
    if (r >= 0) {
      this.#running.splice(r, 1);
      this.blocks.free(seq.id);
      return;
    }
    const w = this.#waiting.indexOf(seq);
    if (w >= 0) this.#waiting.splice(w, 1);
  }
}
