/**
 * The in-process listeners of a store, by response id: what `ResponseStore.subscribe` registers and a store calls
 * when a response's log or snapshot changes. A listener may unsubscribe itself (or others) while being called.
 */
export class ResponseListeners {
  readonly #byId = new Map<string, Set<() => void>>();

  /** Registers listener for id; the returned function removes it (and the id's entry once it has none). */
  subscribe(id: string, listener: () => void): () => void {
    let set = this.#byId.get(id);
    if (!set) this.#byId.set(id, set = new Set());
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#byId.get(id) === set) this.#byId.delete(id);
    };
  }

  /** Calls every listener of id. */
  notify(id: string): void {
    const set = this.#byId.get(id);
    if (!set) return;
    // Copy: a listener may unsubscribe itself while being called.
    for (const listener of [...set]) listener();
  }

  /** The ids that have listeners now (a copy: notifying may change them). */
  ids(): string[] {
    return [...this.#byId.keys()];
  }

  clear(): void {
    this.#byId.clear();
  }
}
