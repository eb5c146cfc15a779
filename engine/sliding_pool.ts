/**
 * The block accounting of a backend's second KV pool, the one its sliding-window layers use (BackendInfo
 * `slidingWindow`): `numBlocks` blocks taken and given back one by one. The BlockManager decides which sequence
 * holds which; this unit only counts references and keeps released blocks whose content is known for reuse.
 *
 * A block's content is named by the content id of the main-pool block at the same position of the same token prefix
 * (BlockManager's chained prefix ids, never reused), so a cached sliding block is found from a prefix hit's main
 * blocks without a chain of its own.
 *
 * Invariants:
 * - A block is in exactly one of: the free stack (refCount 0, no content), the evictable LRU list (refCount 0, with
 *   content), in use (refCount > 0). So free + evictable + used = numBlocks.
 * - A content id names at most one block here (`register` refuses a second), and that block's content is the KV of
 *   exactly the token prefix the id stands for.
 */
import { BlockLru } from "./block_lru.ts";

const NONE = -1;

export class SlidingPool {
  readonly numBlocks: number;
  readonly #refCount: Int32Array;
  readonly #free: Int32Array;
  #numFree: number;
  readonly #lru: BlockLru;
  /** Content id of each block (0 = none). */
  readonly #content: Float64Array;
  readonly #byContent = new Map<number, number>();

  constructor(numBlocks: number) {
    if (!(Number.isInteger(numBlocks) && numBlocks >= 1)) {
      throw new RangeError("numSlidingBlocks must be a positive integer");
    }
    this.numBlocks = numBlocks;
    this.#refCount = new Int32Array(numBlocks);
    this.#free = new Int32Array(numBlocks);
    for (let i = 0; i < numBlocks; i++) this.#free[i] = numBlocks - 1 - i;
    this.#numFree = numBlocks;
    this.#lru = new BlockLru(numBlocks);
    this.#content = new Float64Array(numBlocks);
  }

  /** Blocks that could still be taken: free plus evictable cached ones. */
  get numFreeBlocks(): number {
    return this.#numFree + this.#lru.size;
  }

  get numUsedBlocks(): number {
    return this.numBlocks - this.#numFree - this.#lru.size;
  }

  get numCachedBlocks(): number {
    return this.#lru.size;
  }

  refCount(block: number): number {
    return this.#refCount[block] ?? 0;
  }

  isCached(block: number): boolean {
    return (this.#content[block] ?? 0) !== 0;
  }

  /** The block holding the KV of content id `content`, or -1. */
  lookup(content: number): number {
    return this.#byContent.get(content) ?? NONE;
  }

  /** One block with refCount 1: a free one, else the least recently released cached one (its content forgotten). */
  take(): number {
    let b: number;
    if (this.#numFree > 0) b = this.#free[--this.#numFree]!;
    else if (this.#lru.oldest !== NONE) {
      b = this.#lru.oldest;
      this.#lru.remove(b);
      this.#byContent.delete(this.#content[b]!);
      this.#content[b] = 0;
    } else throw new Error("sliding pool: exhausted");
    this.#refCount[b] = 1;
    return b;
  }

  /** One more reference to a block found by `lookup`. */
  acquire(block: number): void {
    if (this.#refCount[block] === 0) this.#lru.remove(block);
    this.#refCount[block] = this.#refCount[block]! + 1;
  }

  /** Names a computed block's content; false (nothing changes) when another block already holds it. */
  register(block: number, content: number): boolean {
    if (this.#byContent.has(content) || this.#content[block] !== 0) return false;
    this.#byContent.set(content, block);
    this.#content[block] = content;
    return true;
  }

  release(block: number): void {
    const rc = this.#refCount[block]! - 1;
    if (rc < 0) throw new Error(`sliding pool: block ${block} released more often than taken`);
    this.#refCount[block] = rc;
    if (rc > 0) return;
    if (this.#content[block] !== 0) this.#lru.append(block);
    else this.#free[this.#numFree++] = block;
  }
}
