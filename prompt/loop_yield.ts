/**
 * Cooperative yielding for long per-request CPU work (reading and decoding a large body, counting prompt tokens):
 * the work checks `due()` between slices and awaits `yield()` when it had the event loop for `sliceMs`, so other
 * streams' steps (timers, I/O callbacks) run in between. A promise that resolves at once would not do: microtasks
 * run before any timer or I/O callback, so only a macrotask hands the loop over.
 */
export class LoopYielder {
  readonly #sliceMs: number;
  #since = performance.now();

  constructor(sliceMs = 2) {
    this.#sliceMs = sliceMs;
  }

  /** Whether the current slice used up its time. */
  due(): boolean {
    return performance.now() - this.#since >= this.#sliceMs;
  }

  /** Hands the event loop over for one turn; the next slice starts when it comes back. */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    this.#since = performance.now();
  }

  /** Yields if the slice is used up. */
  async maybeYield(): Promise<void> {
    if (this.due()) await this.yield();
  }
}
