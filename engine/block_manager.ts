/**
 * Paged KV accounting: a pool of `numBlocks` blocks of `blockSize` token slots. The backend holds the tensors; this
 * unit decides which block holds which sequence's positions (block j of a sequence holds positions j·blockSize ..).
 *
 * Blocks are taken as a sequence grows (`ensureCapacity`), never reserved for its worst case, so a request whose
 * output may fill the whole context costs only what it has actually produced.
 *
 * Prefix caching (when enabled): once every slot of a block is computed, the block is registered under its content,
 * which is (content of the parent block, this block's tokens); content ids are never reused, so a content id stands
 * for one exact token prefix. Lookup hashes (parent content id, tokens) into a number and then compares the parent id
 * and the stored tokens, so a hash collision costs a comparison, never a wrong hit. A later sequence whose prompt
 * starts with the same full blocks lists the same block ids and skips their prefill.
 *
 * Invariants:
 * - refCount[b] ≥ 0; a block is in exactly one of: the free stack (refCount 0, unregistered), the evictable LRU list
 *   (refCount 0, registered), in use (refCount > 0). So free + evictable + used = numBlocks.
 * - A block listed by two sequences is registered (full and computed). A sequence only writes positions ≥ its computed
 *   length, and registered blocks lie wholly below it, so a shared block is never written and no copy-on-write is
 *   needed. `ensureCapacity` checks the blocks a sequence may write are its own.
 * - Evictable blocks keep their KV until their slot is needed; allocation takes free blocks first, then evicts the
 *   least recently released one. A sequence is released tail block first, so its deepest blocks go before its shared
 *   prefix.
 * - Rolled-back drafts need nothing here: blocks past a sequence's computed length stay allocated to it and are
 *   overwritten by its next step.
 *
 * Sliding-window layers (`slidingWindow` W > 0: the backend keeps them in a second pool, SlidingPool): every
 * sequence also has a sliding table, indexed like its main one, whose entries before its window are -1. A step of a
 * sequence with computed length c feeds positions ≥ c, whose windows start at ≥ c − W + 1 (drafts and rollback only
 * move the computed length forward from the step's start), so once the computed length reaches c the sliding blocks
 * wholly before c − W + 1 are given back (`markComputed`): a long sequence holds at most ceil((W − 1) / blockSize)
 * + 1 sliding blocks before a step, plus those its step feeds. A full computed sliding block is cached under its main
 * block's content id; a prefix hit of P tokens counts only as far as the sliding blocks of [P − W + 1, P) are cached
 * too, else it is shortened.
 */

import { BlockLru } from "./block_lru.ts";
import { SlidingPool } from "./sliding_pool.ts";

export interface BlockManagerOptions {
  readonly numBlocks: number;
  /** Tokens per block (default 16). */
  readonly blockSize?: number;
  /** Share full computed prefix blocks between sequences (default false). */
  readonly enablePrefixCache?: boolean;
  /** Lookup keys are folded to this many bits (default 53); tests use few bits to force hash collisions. */
  readonly keyBits?: number;
  /** The backend's sliding window (BackendInfo `slidingWindow`); absent or 0: no second pool. */
  readonly slidingWindow?: number;
  /** Blocks of the sliding layers' pool (required with `slidingWindow`). */
  readonly numSlidingBlocks?: number;
}

interface SeqBlocks {
  readonly blocks: number[];
  /** Leading blocks whose content id is known (registered here, or equal to a registered block). */
  hashed: number;
  /** Content id of block `hashed - 1`; 0 (the empty prefix) when none. */
  parent: number;
  /** With a sliding pool: its block for each entry of `blocks`, -1 before the window. Same length as `blocks`. */
  readonly win: number[];
  /** Entries of `win` before this are -1. */
  winFrom: number;
}

const NONE = -1;

export class BlockManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly prefixCaching: boolean;
  /** 0 without a sliding pool. */
  readonly slidingWindow: number;
  readonly #win: SlidingPool | undefined;

  readonly #refCount: Int32Array;
  /** Free stack of unregistered blocks with refCount 0. */
  readonly #free: Int32Array;
  #numFree: number;
  /** LRU list of registered blocks with refCount 0: head is evicted first. */
  readonly #lru: BlockLru;
  /** Content id of a block whose content is known (0 = none); ids start at 1 and are never reused. */
  readonly #content: Float64Array;
  readonly #parentContent: Float64Array;
  readonly #registered: Uint8Array;
  /** Copy of a registered block's tokens, compared on every hit. */
  readonly #tokens: Int32Array;
  readonly #buckets = new Map<number, number>();
  readonly #keyRange: number;
  readonly #bucketNext: Int32Array;
  #nextContent = 1;
  readonly #seqs = new Map<number, SeqBlocks>();
  #queriedTokens = 0;
  #hitTokens = 0;

  constructor(options: BlockManagerOptions) {
    const { numBlocks } = options;
    const blockSize = options.blockSize ?? 16;
    if (!(Number.isInteger(numBlocks) && numBlocks >= 1)) throw new RangeError("numBlocks must be a positive integer");
    if (!(Number.isInteger(blockSize) && blockSize >= 1)) throw new RangeError("blockSize must be a positive integer");
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.prefixCaching = options.enablePrefixCache ?? false;
    const keyBits = options.keyBits ?? 53;
    if (!(Number.isInteger(keyBits) && keyBits >= 0 && keyBits <= 53)) throw new RangeError("keyBits must be 0..53");
    this.#keyRange = 2 ** keyBits;
    this.#refCount = new Int32Array(numBlocks);
    this.#free = new Int32Array(numBlocks);
    // Popped from the end: block 0 is handed out first.
    for (let i = 0; i < numBlocks; i++) this.#free[i] = numBlocks - 1 - i;
    this.#numFree = numBlocks;
    this.#lru = new BlockLru(numBlocks);
    this.#registered = new Uint8Array(numBlocks);
    const cacheSlots = this.prefixCaching ? numBlocks : 0;
    this.#content = new Float64Array(cacheSlots);
    this.#parentContent = new Float64Array(cacheSlots);
    this.#tokens = new Int32Array(cacheSlots * blockSize);
    this.#bucketNext = new Int32Array(cacheSlots).fill(NONE);
    const window = options.slidingWindow ?? 0;
    if (!(Number.isInteger(window) && window >= 0)) {
      throw new RangeError("slidingWindow must be a non-negative integer");
    }
    this.slidingWindow = window;
    this.#win = window > 0 ? new SlidingPool(options.numSlidingBlocks ?? 0) : undefined;
  }

  /** Blocks of the sliding pool (0 without one). */
  get numSlidingBlocks(): number {
    return this.#win?.numBlocks ?? 0;
  }

  /** Unreferenced sliding blocks kept for their cached KV. */
  get numCachedSlidingBlocks(): number {
    return this.#win?.numCachedBlocks ?? 0;
  }

  /** Sliding blocks held by at least one sequence. */
  get numUsedSlidingBlocks(): number {
    return this.#win?.numUsedBlocks ?? 0;
  }

  /** Sliding blocks a sequence could still take: free plus evictable cached ones. */
  get numFreeSlidingBlocks(): number {
    return this.#win?.numFreeBlocks ?? 0;
  }

  /** Sliding blocks a sequence holds now (its table's entries other than -1). */
  slidingBlocksHeld(seqId: number): number {
    const seq = this.#seq(seqId);
    return seq.win.length - seq.winFrom;
  }

  /** Blocks a sequence could still take: free plus evictable cached ones. */
  get numFreeBlocks(): number {
    return this.#numFree + this.#lru.size;
  }

  /** Blocks held by at least one sequence. */
  get numUsedBlocks(): number {
    return this.numBlocks - this.#numFree - this.#lru.size;
  }

  /** Unreferenced blocks kept for their cached KV. */
  get numCachedBlocks(): number {
    return this.#lru.size;
  }

  /** Fraction 0..1 of blocks held by sequences. */
  get usage(): number {
    return this.numUsedBlocks / this.numBlocks;
  }

  /** Prompt tokens looked up in the prefix cache by successful `allocatePrompt` calls. */
  get queriedTokens(): number {
    return this.#queriedTokens;
  }

  /** Of those, tokens served from cached blocks. */
  get hitTokens(): number {
    return this.#hitTokens;
  }

  has(seqId: number): boolean {
    return this.#seqs.has(seqId);
  }

  /** Blocks of the sequence in position order (block j holds positions j·blockSize ..). */
  blockTable(seqId: number): readonly number[] {
    return this.#seq(seqId).blocks;
  }

  /**
   * Writes the blocks holding positions 0 .. numTokens (default: all the sequence's blocks) into
   * `out[offset .. offset + stride)`, -1 after them. A sequence may hold blocks past its context (kept after rejected
   * drafts); a step's row lists only those its context reaches.
   */
  writeBlockTable(seqId: number, out: Int32Array, offset: number, stride: number, numTokens?: number): void {
    const blocks = this.#seq(seqId).blocks;
    const n = numTokens === undefined ? blocks.length : Math.ceil(numTokens / this.blockSize);
    if (n > blocks.length) throw new RangeError(`sequence ${seqId} holds ${blocks.length} blocks, not ${n}`);
    if (n > stride) throw new RangeError(`sequence ${seqId} needs ${n} blocks; the row has ${stride}`);
    for (let j = 0; j < n; j++) out[offset + j] = blocks[j]!;
    out.fill(NONE, offset + n, offset + stride);
  }

  /**
   * The sliding table (-1 before the window) like `writeBlockTable`; entries past the sequence's are -1.
   */
  writeSlidingBlockTable(seqId: number, out: Int32Array, offset: number, stride: number, numTokens?: number): void {
    const win = this.#seq(seqId).win;
    const n = numTokens === undefined ? win.length : Math.ceil(numTokens / this.blockSize);
    if (n > win.length) throw new RangeError(`sequence ${seqId} holds ${win.length} sliding entries, not ${n}`);
    if (n > stride) throw new RangeError(`sequence ${seqId} needs ${n} blocks; the row has ${stride}`);
    for (let j = 0; j < n; j++) out[offset + j] = win[j]!;
    out.fill(NONE, offset + n, offset + stride);
  }

  /** The sliding table in position order (-1 before the window; empty without a sliding pool). */
  slidingBlockTable(seqId: number): readonly number[] {
    return this.#seq(seqId).win;
  }

  /** Most tokens the sequence could hold now: its blocks plus every free or evictable one, in both pools. */
  maxTokensFor(seqId: number): number {
    const seq = this.#seq(seqId);
    const main = (seq.blocks.length + this.numFreeBlocks) * this.blockSize;
    if (this.#win === undefined) return main;
    return Math.min(main, (seq.win.length + this.#win.numFreeBlocks) * this.blockSize);
  }

  refCount(block: number): number {
    return this.#refCount[block] ?? 0;
  }

  /** Whether the block is registered in the prefix cache (full and computed). */
  isCached(block: number): boolean {
    return this.#registered[block] === 1;
  }

  /**
   * Starts a sequence whose known tokens are `tokens[0 .. length)`: takes the cached blocks matching its prefix (at
   * most floor((length - 1) / blockSize), so the last token is always computed and yields logits) and allocates blocks
   * for the first `maxFirstChunk` tokens after them. Returns the cached token count, or -1, changing nothing, when
   * the pool cannot hold that first chunk and still leave `keepFree` blocks free or evictable.
   */
  allocatePrompt(
    seqId: number,
    tokens: ArrayLike<number>,
    length: number,
    maxFirstChunk: number,
    keepFree = 0,
  ): number {
    if (this.#seqs.has(seqId)) throw new Error(`block manager: sequence ${seqId} already holds blocks`);
    if (!(Number.isInteger(length) && length >= 1 && length <= tokens.length)) {
      throw new RangeError(`block manager: bad prompt length ${length}`);
    }
    if (!(maxFirstChunk >= 1)) throw new RangeError("block manager: maxFirstChunk must be at least 1");
    const bs = this.blockSize;
    const seq: SeqBlocks = { blocks: [], hashed: 0, parent: 0, win: [], winFrom: 0 };
    if (this.prefixCaching) {
      const most = Math.floor((length - 1) / bs);
      while (seq.hashed < most) {
        const b = this.#lookup(seq.parent, tokens, seq.hashed * bs);
        if (b === NONE) break;
        seq.blocks.push(b);
        seq.parent = this.#content[b]!;
        seq.hashed++;
      }
    }
    const win = this.#win;
    if (win !== undefined) {
      // The hit counts only as far as the sliding blocks its next position's window reaches are cached.
      while (seq.hashed > 0 && !this.#windowCached(seq.blocks, seq.hashed)) seq.hashed--;
      seq.blocks.length = seq.hashed;
      seq.parent = seq.hashed > 0 ? this.#content[seq.blocks[seq.hashed - 1]!]! : 0;
      seq.winFrom = this.#windowStart(seq.hashed * bs);
    }
    let evictableHits = 0;
    for (const b of seq.blocks) if (this.#refCount[b] === 0) evictableHits++;
    const cached = seq.hashed * bs;
    let hold = cached + Math.min(maxFirstChunk, length - cached);
    let winEvictableHits = 0;
    if (win !== undefined) {
      for (let j = seq.winFrom; j < seq.hashed; j++) {
        if (win.refCount(win.lookup(this.#content[seq.blocks[j]!]!)) === 0) winEvictableHits++;
      }
      // A first chunk longer than the sliding pool can hold is cut (the rest follows as later chunks).
      const winRoom = win.numFreeBlocks - winEvictableHits - keepFree;
      hold = Math.min(hold, (seq.hashed + winRoom) * bs);
      if (hold <= cached) return -1;
    }
    const needed = Math.ceil(hold / bs) - seq.hashed;
    if (needed > this.numFreeBlocks - evictableHits - keepFree) return -1;
    for (const b of seq.blocks) {
      if (this.#refCount[b] === 0) this.#lru.remove(b);
      this.#refCount[b] = this.#refCount[b]! + 1;
    }
    if (win !== undefined) {
      for (let j = 0; j < seq.hashed; j++) {
        if (j < seq.winFrom) {
          seq.win.push(NONE);
          continue;
        }
        const w = win.lookup(this.#content[seq.blocks[j]!]!);
        win.acquire(w);
        seq.win.push(w);
      }
    }
    this.#seqs.set(seqId, seq);
    for (let j = 0; j < needed; j++) {
      seq.blocks.push(this.#take());
      if (win !== undefined) seq.win.push(win.take());
    }
    this.#queriedTokens += length;
    this.#hitTokens += cached;
    return cached;
  }

  /**
   * Grows the sequence's table to hold `numTokens` positions. Returns false, changing nothing, when the free and
   * evictable blocks cannot cover it. Never shrinks.
   */
  ensureCapacity(seqId: number, numTokens: number): boolean {
    const seq = this.#seq(seqId);
    const needed = Math.ceil(numTokens / this.blockSize) - seq.blocks.length;
    if (needed <= 0) return true;
    const win = this.#win;
    if (needed > this.numFreeBlocks || (win !== undefined && needed > win.numFreeBlocks)) return false;
    for (let j = 0; j < needed; j++) {
      seq.blocks.push(this.#take());
      if (win !== undefined) seq.win.push(win.take());
    }
    return true;
  }

  /**
   * Throws unless every block holding a position ≥ `fromPosition` belongs to this sequence alone and is not cached:
   * the positions a step writes must never land in a shared block.
   */
  assertWritable(seqId: number, fromPosition: number): void {
    const { blocks, win } = this.#seq(seqId);
    for (let j = Math.floor(fromPosition / this.blockSize); j < blocks.length; j++) {
      const b = blocks[j]!;
      if (this.#refCount[b] !== 1 || this.#registered[b] === 1) {
        throw new Error(`block manager: sequence ${seqId} would write shared block ${b} (position ${fromPosition})`);
      }
      if (this.#win === undefined) continue;
      const w = win[j]!;
      if (w === NONE || this.#win.refCount(w) !== 1 || this.#win.isCached(w)) {
        throw new Error(
          `block manager: sequence ${seqId} would write shared or missing sliding block ${w} (position ${fromPosition})`,
        );
      }
    }
  }

  /**
   * Records that `tokens[0 .. computedLength)` of the sequence are computed; newly full blocks join the cache, and
   * sliding blocks every later position's window has passed are given back.
   */
  markComputed(seqId: number, tokens: ArrayLike<number>, computedLength: number): void {
    const seq = this.#seq(seqId);
    const bs = this.blockSize;
    if (computedLength > seq.blocks.length * bs || computedLength > tokens.length) {
      throw new RangeError(`block manager: sequence ${seqId} cannot have ${computedLength} computed tokens`);
    }
    this.#register(seq, tokens, computedLength);
    const win = this.#win;
    if (win === undefined) return;
    for (const end = this.#windowStart(computedLength); seq.winFrom < end; seq.winFrom++) {
      win.release(seq.win[seq.winFrom]!);
      seq.win[seq.winFrom] = NONE;
    }
  }

  #register(seq: SeqBlocks, tokens: ArrayLike<number>, computedLength: number): void {
    const bs = this.blockSize;
    if (!this.prefixCaching) return;
    const full = Math.floor(computedLength / bs);
    for (; seq.hashed < full; seq.hashed++) {
      const b = seq.blocks[seq.hashed]!;
      const offset = seq.hashed * bs;
      const same = this.#lookup(seq.parent, tokens, offset);
      if (same !== NONE) {
        // Identical content computed twice (two sequences prefilled it at once): this copy stays private.
        this.#content[b] = this.#content[same]!;
      } else {
        if (this.#refCount[b] !== 1) throw new Error(`block manager: registering block ${b} held by others`);
        this.#content[b] = this.#nextContent++;
        this.#parentContent[b] = seq.parent;
        for (let i = 0; i < bs; i++) this.#tokens[b * bs + i] = tokens[offset + i]!;
        const key = this.#key(seq.parent, tokens, offset);
        this.#bucketNext[b] = this.#buckets.get(key) ?? NONE;
        this.#buckets.set(key, b);
        this.#registered[b] = 1;
      }
      seq.parent = this.#content[b]!;
      const w = seq.win[seq.hashed];
      if (this.#win !== undefined && w !== undefined && w !== NONE) this.#win.register(w, seq.parent);
    }
  }

  /** Index of the first block the window of a step starting at `position` reaches. */
  #windowStart(position: number): number {
    return Math.floor(Math.max(0, position - this.slidingWindow + 1) / this.blockSize);
  }

  /** Whether the sliding blocks the window of position h·blockSize reaches, of main blocks[0 .. h), are cached. */
  #windowCached(blocks: readonly number[], h: number): boolean {
    for (let j = this.#windowStart(h * this.blockSize); j < h; j++) {
      if (this.#win!.lookup(this.#content[blocks[j]!]!) === NONE) return false;
    }
    return true;
  }

  /** Releases every block of the sequence (cached ones stay evictable). Unknown ids are ignored. */
  free(seqId: number): void {
    const seq = this.#seqs.get(seqId);
    if (seq === undefined) return;
    this.#seqs.delete(seqId);
    if (this.#win !== undefined) {
      for (let j = seq.win.length - 1; j >= seq.winFrom; j--) this.#win.release(seq.win[j]!);
    }
    for (let j = seq.blocks.length - 1; j >= 0; j--) {
      const b = seq.blocks[j]!;
      const rc = this.#refCount[b]! - 1;
      if (rc < 0) throw new Error(`block manager: block ${b} released more often than taken`);
      this.#refCount[b] = rc;
      if (rc > 0) continue;
      if (this.#registered[b] === 1) this.#lru.append(b);
      else {
        if (this.prefixCaching) this.#content[b] = 0;
        this.#free[this.#numFree++] = b;
      }
    }
  }

  #seq(seqId: number): SeqBlocks {
    const seq = this.#seqs.get(seqId);
    if (seq === undefined) throw new Error(`block manager: unknown sequence ${seqId}`);
    return seq;
  }

  /** One block with refCount 1: a free one, else the least recently released cached one (its content forgotten). */
  #take(): number {
    let b: number;
    if (this.#numFree > 0) b = this.#free[--this.#numFree]!;
    else if (this.#lru.oldest !== NONE) {
      b = this.#lru.oldest;
      this.#lru.remove(b);
      this.#unregister(b);
    } else throw new Error("block manager: pool exhausted");
    this.#refCount[b] = 1;
    return b;
  }

  #unregister(b: number): void {
    const bs = this.blockSize;
    const key = this.#key(this.#parentContent[b]!, this.#tokens, b * bs);
    let at = this.#buckets.get(key) ?? NONE;
    let prev = NONE;
    while (at !== NONE && at !== b) {
      prev = at;
      at = this.#bucketNext[at]!;
    }
    if (at !== b) throw new Error(`block manager: cached block ${b} missing from its bucket`);
    const next = this.#bucketNext[b]!;
    if (prev !== NONE) this.#bucketNext[prev] = next;
    else if (next !== NONE) this.#buckets.set(key, next);
    else this.#buckets.delete(key);
    this.#bucketNext[b] = NONE;
    this.#registered[b] = 0;
    this.#content[b] = 0;
  }

  /** The registered block whose parent content is `parent` and whose tokens are tokens[offset .. + blockSize). */
  #lookup(parent: number, tokens: ArrayLike<number>, offset: number): number {
    const bs = this.blockSize;
    let b = this.#buckets.get(this.#key(parent, tokens, offset)) ?? NONE;
    for (; b !== NONE; b = this.#bucketNext[b]!) {
      if (this.#parentContent[b] !== parent) continue;
      let i = 0;
      while (i < bs && this.#tokens[b * bs + i] === tokens[offset + i]) i++;
      if (i === bs) return b;
    }
    return NONE;
  }

  /** Two 32-bit multiply-rotate lanes over (parent id, tokens), folded into a 53-bit Map key. */
  #key(parent: number, tokens: ArrayLike<number>, offset: number): number {
    const lo = parent >>> 0;
    const hi = Math.floor(parent / 4294967296) >>> 0;
    let a = mix(0x2545f491 ^ lo, hi);
    let c = mix(0x9e3779b9 ^ hi, lo);
    for (let i = 0; i < this.blockSize; i++) {
      const t = tokens[offset + i]! | 0;
      a = mix(a, t);
      c = mix(c, t ^ 0x5bd1e995);
    }
    return ((fmix(a) >>> 11) * 4294967296 + (fmix(c) >>> 0)) % this.#keyRange;
  }
}

function mix(h: number, v: number): number {
  h = Math.imul(h ^ v, 0xcc9e2d51);
  return Math.imul((h << 15) | (h >>> 17), 0x1b873593);
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
