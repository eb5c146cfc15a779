/**
 * The responses a WebSocket connection created last, kept in memory so `previous_response_id` continues from them
 * even with `store: false` (WebSocket mode's connection-local state). Each entry is what a `previous` lookup returns:
 * the final Response and every item before its output. The oldest entry goes when the cache is full.
 */
import type { PreviousLookup } from "./responses_request.ts";

interface Entry {
  readonly response: Record<string, unknown>;
  readonly conversation: { readonly version: 1; readonly items: readonly Record<string, unknown>[] };
}

export class RecentResponses {
  readonly #capacity: number;
  /** Insertion order is age: the first key is the oldest. */
  readonly #entries = new Map<string, Entry>();

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("capacity must be a positive integer");
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Remembers a finished response and the items before its output; a full cache forgets its oldest entry. */
  remember(response: Record<string, unknown>, history: readonly Record<string, unknown>[]): void {
    const id = response.id;
    if (typeof id !== "string") return;
    this.#entries.delete(id);
    this.#entries.set(id, { response, conversation: { version: 1, items: history } });
    while (this.#entries.size > this.#capacity) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }

  /** Forgets a response: continuing from it on this connection is then refused (or served from the store). */
  forget(id: string): void {
    this.#entries.delete(id);
  }

  readonly lookup: PreviousLookup = (id) => Promise.resolve(this.#entries.get(id));
}
