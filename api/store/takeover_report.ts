/**
 * The responses one orphan recovery failed, grouped by the owner whose lease had expired, reported once per owner as a
 * `took_over` lease event (with how long ago that owner last renewed), so a log says who took what from whom.
 */
import type { LeaseEvent } from "./response_store.ts";

export class TakeoverReport {
  readonly #now: number;
  readonly #byOwner = new Map<string | null, { ids: string[]; heartbeat: number | null }>();
  count = 0;

  /** now: the recovering server's clock when it judged the leases (epoch ms). */
  constructor(now: number) {
    this.#now = now;
  }

  /** A response failed here; heartbeat: its owner's last renewal (epoch ms), null when the owner has no lease row. */
  add(id: string, owner: string | null, heartbeat: number | null): void {
    const entry = this.#byOwner.get(owner) ?? { ids: [], heartbeat };
    entry.ids.push(id);
    this.#byOwner.set(owner, entry);
    this.count++;
  }

  report(onLease: ((event: LeaseEvent) => void) | undefined): void {
    if (onLease === undefined) return;
    for (const [owner, { ids, heartbeat }] of this.#byOwner) {
      onLease({ kind: "took_over", owner, ids, renewedMsAgo: heartbeat === null ? null : this.#now - heartbeat });
    }
  }
}
