/**
 * What a PostgreSQL store's lease keeping reports (onLease): a heartbeat that cannot reach the database while it is
 * stopped, and nothing once it is back. Takeovers are reported in the conformance suite, on both stores.
 */
import assert from "node:assert/strict";
import { PostgresStore } from "../../../api/store/postgres_store.ts";
import type { LeaseEvent } from "../../../api/store/response_store.ts";
import { startPostgres } from "../../../testing/postgres_server.ts";

Deno.test("postgres store: a lease renewal that cannot reach the database is reported, and nothing once it is back", async () => {
  const pg = await startPostgres();
  const events: LeaseEvent[] = [];
  try {
    const url = await pg.createDatabase("lease_report");
    // A beat every 100 ms.
    const store = await PostgresStore.connect(url, { leaseMs: 300, onLease: (e) => events.push(e) });
    try {
      await store.startLease();
      await new Promise((r) => setTimeout(r, 350));
      assert.equal(events.length, 0, "nothing to report while the database answers");
      await pg.stop();
      for (let i = 0; i < 50 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
      assert.ok(events.length > 0, "a failed renewal was reported");
      for (const event of events) {
        assert.equal(event.kind, "renewal_failed");
        if (event.kind === "renewal_failed") assert.ok(event.error.length > 0);
      }
      await pg.start();
      // Back: beats renew again, and after the outage grace nothing more is reported.
      for (let i = 0; i < 100; i++) {
        await new Promise((r) => setTimeout(r, 100));
        try {
          await store.heartbeat();
          break;
        } catch {
          // Still reconnecting.
        }
      }
      const seen = events.length;
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(events.length, seen, "no failure reported once the database is back");
    } finally {
      await store.close();
    }
  } finally {
    await pg.close();
  }
});
