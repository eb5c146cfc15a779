/**
 * The evictable blocks of a KV pool in least-recently-released order: an intrusive doubly linked list over block
 * ids, so appending, removing any block and taking the oldest are O(1) with no allocation after construction.
 *
 * Invariants: a block is in the list at most once; `size` counts the blocks in it; `oldest` is -1 when it is empty.
 */
const NONE = -1;

export class BlockLru {
  readonly #prev: Int32Array;
  readonly #next: Int32Array;
  #head = NONE;
  #tail = NONE;
  #size = 0;

  constructor(numBlocks: number) {
    this.#prev = new Int32Array(numBlocks).fill(NONE);
    this.#next = new Int32Array(numBlocks).fill(NONE);
  }

  /** Blocks in the list. */
  get size(): number {
    return this.#size;
  }

  /** The least recently appended block still in the list, or -1. */
  get oldest(): number {
    return this.#head;
  }

  /** Appends `b` (not in the list) as the most recent. */
  append(b: number): void {
    this.#prev[b] = this.#tail;
    this.#next[b] = NONE;
    if (this.#tail !== NONE) this.#next[this.#tail] = b;
    else this.#head = b;
    this.#tail = b;
    this.#size++;
  }

  /** Removes `b`, which is in the list. */
  remove(b: number): void {
    const p = this.#prev[b]!;
    const n = this.#next[b]!;
    if (p !== NONE) this.#next[p] = n;
    else this.#head = n;
    if (n !== NONE) this.#prev[n] = p;
    else this.#tail = p;
    this.#prev[b] = NONE;
    this.#next[b] = NONE;
    this.#size--;
  }
}
