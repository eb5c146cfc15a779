/**
 * KV-cache accounting in tokens. The backend stores the tensors; the engine decides who may hold how much.
 *
 * Admission reserves a sequence's worst case (prompt + max new tokens, capped by the context length), so a running
 * sequence can never run out of cache mid-generation and no preemption is needed. `used` counts tokens actually
 * cached, which is what `stats().kvCacheUsage` reports.
 */
export class KvCacheBudget {
  readonly capacity: number;
  #reserved = 0;
  #used = 0;
  readonly #holders = new Map<number, { reserved: number; used: number }>();

  constructor(capacityTokens: number) {
    if (!(capacityTokens > 0)) throw new RangeError("kv cache budget must be positive");
    this.capacity = capacityTokens;
  }

  get reserved(): number {
    return this.#reserved;
  }

  get used(): number {
    return this.#used;
  }

  /** Fraction 0..1 of the budget holding cached tokens. */
  get usage(): number {
    return this.#used / this.capacity;
  }

  canReserve(tokens: number): boolean {
    return this.#reserved + tokens <= this.capacity;
  }

  reserve(seqId: number, tokens: number): void {
    if (this.#holders.has(seqId)) throw new Error(`kv cache: sequence ${seqId} already holds a reservation`);
    if (!this.canReserve(tokens)) throw new Error(`kv cache: cannot reserve ${tokens} tokens`);
    this.#holders.set(seqId, { reserved: tokens, used: 0 });
    this.#reserved += tokens;
  }

  /** Records how many tokens the sequence has cached now (grows on accept, shrinks on draft rollback). */
  setUsed(seqId: number, tokens: number): void {
    const h = this.#holders.get(seqId);
    if (h === undefined) throw new Error(`kv cache: sequence ${seqId} holds no reservation`);
    if (tokens > h.reserved) throw new Error(`kv cache: sequence ${seqId} exceeds its reservation`);
    this.#used += tokens - h.used;
    h.used = tokens;
  }

  release(seqId: number): void {
    const h = this.#holders.get(seqId);
    if (h === undefined) return;
    this.#holders.delete(seqId);
    this.#reserved -= h.reserved;
    this.#used -= h.used;
  }
}
