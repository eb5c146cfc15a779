/**
 * The store conformance suite: every behaviour the services rely on, run against both implementations (the SQLite
 * file and a real PostgreSQL server started for this file), with several servers on one store where it matters.
 */
import assert from "node:assert/strict";
import type { LeaseEvent, ResponseStore, StoredEvent } from "../../../api/store/response_store.ts";
import {
  postgresBackend,
  sqliteBackend,
  type StoreBackend,
  type StoreDatabase,
} from "../../../testing/store_backends.ts";

const inFlight = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  object: "response",
  status: "in_progress",
  output: [],
  error: null,
  ...extra,
});
const event = (sequence_number: number, type: string): StoredEvent =>
  ({ sequence_number, type, payload: `p${sequence_number}` }) as StoredEvent;
const msg = (id: string, text = id) => ({ id, type: "message", role: "user", content: [{ type: "input_text", text }] });
const conv = (id: string, metadata: Record<string, string> = {}) => ({
  id,
  object: "conversation" as const,
  created_at: 1700000000,
  metadata,
});
const fail = (error: unknown) => {
  throw error;
};

/** Resolves once `check` holds, or fails after `ms`. */
async function eventually(check: () => Promise<boolean> | boolean, what: string, ms = 3000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!await check()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

type Case = (db: StoreDatabase, backend: StoreBackend) => Promise<void>;

const CASES: Record<string, Case> = {
  "create, get, update (indexing output items), delete": async (db) => {
    const store = await db.open();
    try {
      await store.create(inFlight("resp_1"), [msg("in_1")], { version: 2, previous: null, items: [msg("in_1")] });
      assert.equal((await store.get("resp_1"))!.response.status, "in_progress");
      assert.deepEqual((await store.get("resp_1"))!.conversation, { version: 2, previous: null, items: [msg("in_1")] });
      const answer = { id: "msg_1", type: "message", role: "assistant", content: [] };
      await store.update("resp_1", inFlight("resp_1", { status: "completed", output: [answer] }));
      assert.equal((await store.get("resp_1"))!.response.status, "completed");
      assert.deepEqual(await store.item("msg_1"), answer);
      assert.deepEqual(await store.item("in_1"), msg("in_1"));
      assert.equal(await store.item("nope"), undefined);
      assert.equal(await store.delete("resp_1"), true);
      assert.equal(await store.delete("resp_1"), false);
      assert.equal(await store.get("resp_1"), undefined);
      assert.equal(await store.item("msg_1"), undefined, "a deleted response's items are gone");
      assert.equal(await store.item("in_1"), undefined);
    } finally {
      await store.close();
    }
  },

  "the event log replays the suffix after starting_after; a terminal event closes it": async (db) => {
    const store = await db.open();
    try {
      await store.create(inFlight("resp_2"), [], null);
      await store.appendEvents("resp_2", [event(0, "response.created"), event(1, "response.in_progress")]);
      assert.equal(await store.isTerminal("resp_2"), false);
      await store.appendEvents("resp_2", [event(2, "response.output_text.delta"), event(3, "response.completed")]);
      assert.equal(await store.isTerminal("resp_2"), true);
      assert.deepEqual(await store.eventsAfter("resp_2", 1), [
        event(2, "response.output_text.delta"),
        event(3, "response.completed"),
      ]);
      await store.appendEvents("resp_2", [event(4, "response.failed")]);
      assert.deepEqual((await store.eventsAfter("resp_2", -1)).map((e) => e.sequence_number), [0, 1, 2, 3]);
      // A batch with a repeated sequence number is refused whole.
      await store.create(inFlight("resp_3"), [], null);
      await store.appendEvents("resp_3", [event(0, "response.created")]);
      await assert.rejects(() => store.appendEvents("resp_3", [event(1, "response.in_progress"), event(0, "x")]));
      assert.deepEqual((await store.eventsAfter("resp_3", -1)).map((e) => e.sequence_number), [0]);
    } finally {
      await store.close();
    }
  },

  "queued writes read back in call order, interleaved across responses; writes to a deleted response vanish": async (
    db,
  ) => {
    const store = await db.open();
    try {
      await store.create(inFlight("resp_a"), [], null);
      await store.create(inFlight("resp_b"), [], null);
      store.appendLater("resp_a", [event(0, "response.created")], undefined, fail);
      store.appendLater("resp_b", [event(0, "response.created"), event(1, "response.in_progress")], undefined, fail);
      store.appendLater("resp_a", [event(1, "response.in_progress")], inFlight("resp_a"), fail);
      store.appendLater("resp_b", [event(2, "response.completed")], inFlight("resp_b", { status: "completed" }), fail);
      assert.deepEqual((await store.eventsAfter("resp_a", -1)).map((e) => e.sequence_number), [0, 1]);
      assert.equal(await store.isTerminal("resp_b"), true);
      assert.equal((await store.get("resp_b"))!.response.status, "completed");
      store.appendLater("resp_a", [event(2, "response.output_item.added")], undefined, fail);
      await store.appendEvents("resp_a", [event(3, "response.completed")]);
      assert.deepEqual((await store.eventsAfter("resp_a", 1)).map((e) => e.sequence_number), [2, 3]);
      // A failing write goes to its own onError; the others in the batch are kept.
      await store.create(inFlight("resp_c"), [], null);
      await store.create(inFlight("resp_d"), [], null);
      const errors: unknown[] = [];
      store.appendLater("resp_c", [event(0, "response.created")], undefined, fail);
      store.appendLater("resp_d", [event(0, "a"), event(0, "b")], undefined, (e) => errors.push(e));
      await store.flush();
      assert.equal(errors.length, 1);
      assert.deepEqual((await store.eventsAfter("resp_c", -1)).map((e) => e.type), ["response.created"]);
      assert.deepEqual(await store.eventsAfter("resp_d", -1), []);
      // Deleted while its generation is still ending: its last writes leave nothing behind.
      assert.equal(await store.delete("resp_c"), true);
      store.appendLater(
        "resp_c",
        [event(1, "response.completed")],
        inFlight("resp_c", {
          status: "completed",
          output: [{ id: "msg_gone", type: "message" }],
        }),
        fail,
      );
      await store.update("resp_c", inFlight("resp_c"));
      await store.flush();
      assert.equal(await store.get("resp_c"), undefined);
      assert.deepEqual(await store.eventsAfter("resp_c", -1), []);
      assert.equal(await store.item("msg_gone"), undefined);
    } finally {
      await store.close();
    }
  },

  "input items paginate with limit, order and after; items without an id get a stable one": async (db) => {
    const store = await db.open();
    try {
      await store.create(
        inFlight("resp_p"),
        [msg("i0"), msg("i1"), msg("i2"), { type: "message", role: "user" }],
        null,
      );
      const asc = (await store.listInputItems("resp_p", { limit: 2, order: "asc" }))!;
      assert.deepEqual(asc.data.map((i) => i.id), ["i0", "i1"]);
      assert.equal(asc.has_more, true);
      const next = (await store.listInputItems("resp_p", { limit: 10, order: "asc", after: "i1" }))!;
      assert.deepEqual(next.data.map((i) => i.id), ["i2", "resp_p_item_3"]);
      assert.equal(next.has_more, false);
      const desc = (await store.listInputItems("resp_p", { limit: 1, order: "desc" }))!;
      assert.deepEqual([desc.first_id, desc.last_id, desc.has_more], ["resp_p_item_3", "resp_p_item_3", true]);
      assert.equal(await store.listInputItems("resp_none", { limit: 1, order: "asc" }), undefined);
    } finally {
      await store.close();
    }
  },

  "a previous_response_id chain rebuilds its history, and deleting a link keeps its children whole": async (db) => {
    const store = await db.open();
    try {
      const out = (n: number) => [{ id: `out_${n}`, type: "message", role: "assistant", content: [] }];
      await store.create(inFlight("r1"), [msg("u1")], { version: 2, previous: null, items: [msg("u1")] });
      await store.update("r1", inFlight("r1", { status: "completed", output: out(1) }));
      await store.create(inFlight("r2"), [msg("u2")], { version: 2, previous: "r1", items: [msg("u2")] });
      await store.update("r2", inFlight("r2", { status: "completed", output: out(2) }));
      await store.create(inFlight("r3"), [msg("u3")], { version: 2, previous: "r2", items: [msg("u3")] });
      const history = [msg("u1"), ...out(1), msg("u2"), ...out(2), msg("u3")];
      assert.deepEqual(await store.conversationItems("r3"), history);
      assert.equal(await store.delete("r2"), true);
      assert.equal(await store.delete("r1"), true);
      assert.deepEqual(await store.conversationItems("r3"), history);
      assert.equal(await store.conversationItems("r2"), undefined);
    } finally {
      await store.close();
    }
  },

  "subscribers hear this store's writes until they unsubscribe": async (db) => {
    const store = await db.open();
    try {
      await store.create(inFlight("resp_s"), [], null);
      let heard = 0;
      const off = store.subscribe("resp_s", () => heard++);
      await store.appendEvents("resp_s", [event(0, "response.created")]);
      assert.ok(heard >= 1);
      off();
      const before = heard;
      await store.appendEvents("resp_s", [event(1, "response.in_progress")]);
      assert.equal(heard, before);
    } finally {
      await store.close();
    }
  },

  "rows a dead server left in flight are failed once, with a terminal event; a live server's are not": async (db) => {
    let now = 1_000_000;
    const reports: LeaseEvent[] = [];
    const a = await db.open({ owner: "srv_a", leaseMs: 10_000, clock: () => now });
    const b = await db.open({ owner: "srv_b", leaseMs: 10_000, clock: () => now, onLease: (e) => reports.push(e) });
    try {
      await a.heartbeat();
      await b.heartbeat();
      await a.create(inFlight("resp_o"), [], null);
      await a.appendEvents("resp_o", [event(0, "response.created")]);
      assert.equal(await b.ownerOf("resp_o"), "srv_a");
      assert.equal(await b.ownerAlive("srv_a"), true);
      assert.equal(await b.recoverOrphans(), 0);
      // B keeps beating (a third of a lease apart); A has stopped.
      for (let beat = 0; beat < 4; beat++) {
        now += 3_000;
        await b.heartbeat();
      }
      assert.equal(await b.ownerAlive("srv_a"), false);
      assert.deepEqual(reports, [], "nothing taken while A's lease held");
      assert.equal(await b.recoverOrphans(), 1);
      assert.equal(await b.recoverOrphans(), 0, "failed once");
      // Reported once, naming the owner and how long ago it last renewed (four beats of 3 s).
      assert.deepEqual(reports, [{ kind: "took_over", owner: "srv_a", ids: ["resp_o"], renewedMsAgo: 12_000 }]);
      const failed = (await b.get("resp_o"))!.response as { status: string; error: { code: string } };
      assert.equal(failed.status, "failed");
      assert.equal(failed.error.code, "server_error");
      assert.deepEqual((await b.eventsAfter("resp_o", -1)).map((e) => e.type), ["response.created", "response.failed"]);
      // The dead owner's late writes add no second terminal event and do not overwrite the failure.
      await a.appendEvents("resp_o", [event(1, "response.completed")]);
      await a.update("resp_o", inFlight("resp_o", { status: "completed" }));
      assert.equal((await a.get("resp_o"))!.response.status, "failed");
      assert.equal((await a.eventsAfter("resp_o", -1)).length, 2);
      assert.equal(await b.failInFlight("resp_o", { code: "x", message: "y" }), undefined);
    } finally {
      await a.close();
      await b.close();
    }
  },

  "a server back from an outage judges no lease expired for one lease": async (db, backend) => {
    if (backend.name !== "postgres") return;
    let now = 2_000_000;
    const a = await db.open({ owner: "srv_a", leaseMs: 10_000, clock: () => now });
    const b = await db.open({ owner: "srv_b", leaseMs: 10_000, clock: () => now });
    try {
      await a.heartbeat();
      await b.heartbeat();
      await a.create(inFlight("resp_g"), [], null);
      // Neither could beat for 12 s (the database was away); B is back first.
      now += 12_000;
      await b.heartbeat();
      assert.equal(await b.ownerAlive("srv_a"), true, "A may simply not have beaten yet");
      assert.equal(await b.recoverOrphans(), 0);
      now += 3_000;
      await a.heartbeat();
      await b.heartbeat();
      now += 8_000;
      await a.heartbeat();
      await b.heartbeat();
      assert.equal(await b.ownerAlive("srv_a"), true);
      assert.equal(await b.recoverOrphans(), 0);
      assert.equal((await b.get("resp_g"))!.response.status, "in_progress");
      // A really died: once the grace is over and A's lease expired, B takes over.
      for (let beat = 0; beat < 4; beat++) {
        now += 3_000;
        await b.heartbeat();
      }
      assert.equal(await b.ownerAlive("srv_a"), false);
      assert.equal(await b.recoverOrphans(), 1);
    } finally {
      await a.close();
      await b.close();
    }
  },

  "a cancellation asked of any server reaches the owner's listener": async (db) => {
    const a = await db.open({ owner: "srv_a" });
    const b = await db.open({ owner: "srv_b" });
    try {
      await a.startLease();
      await b.startLease();
      const heard: string[] = [];
      a.onCancelRequest((id) => heard.push(id));
      await a.create(inFlight("resp_x"), [], null);
      await b.requestCancel("resp_x");
      // SQLite: read at A's next batched commit; PostgreSQL: a notification.
      a.appendLater("resp_x", [event(0, "response.created")], undefined, fail);
      await eventually(() => heard.includes("resp_x"), "the cancellation on A");
    } finally {
      await a.close();
      await b.close();
    }
  },

  "with cross-server notifications, another server's subscriber hears each commit": async (db) => {
    const a = await db.open({ owner: "srv_a" });
    const b = await db.open({ owner: "srv_b" });
    try {
      if (!b.crossServerNotify) return;
      await a.create(inFlight("resp_n"), [], null);
      let heard = 0;
      const off = b.subscribe("resp_n", () => heard++);
      a.appendLater("resp_n", [event(0, "response.created")], undefined, fail);
      await eventually(() => heard > 0, "B hearing A's append");
      assert.deepEqual((await b.eventsAfter("resp_n", -1)).map((e) => e.type), ["response.created"]);
      off();
    } finally {
      await a.close();
      await b.close();
    }
  },

  "the reasoning key: the first stored wins, every server gets it": async (db) => {
    const a = await db.open();
    const b = await db.open();
    try {
      const first = crypto.getRandomValues(new Uint8Array(32));
      const second = crypto.getRandomValues(new Uint8Array(32));
      const [ka, kb] = await Promise.all([a.reasoningKey(first), b.reasoningKey(second)]);
      assert.deepEqual(ka, kb);
      assert.ok([first, second].some((k) => k.every((v, i) => v === ka[i])));
      assert.deepEqual(await b.reasoningKey(crypto.getRandomValues(new Uint8Array(32))), ka);
    } finally {
      await a.close();
      await b.close();
    }
  },

  "responses past the TTL are swept, in-flight ones kept": async (db) => {
    let now = 5_000_000;
    const store = await db.open({ ttlSeconds: 60, clock: () => now });
    try {
      await store.create(inFlight("resp_old", { status: "completed" }), [msg("m_old")], null);
      await store.create(inFlight("resp_run"), [], null);
      now += 30_000;
      assert.equal(await store.sweep(), 0);
      await store.create(inFlight("resp_new", { status: "completed" }), [], null);
      now += 31_000;
      assert.equal(await store.sweep(), 1);
      assert.equal(await store.get("resp_old"), undefined);
      assert.notEqual(await store.get("resp_run"), undefined);
      assert.notEqual(await store.get("resp_new"), undefined);
    } finally {
      await store.close();
    }
  },

  "conversations: create, get, update metadata, items, delete": async (db) => {
    const store = await db.open();
    const c = store.conversations;
    try {
      assert.deepEqual(await c.create(conv("conv_1", { a: "1" }), [msg("m1"), msg("m2")]), conv("conv_1", { a: "1" }));
      assert.deepEqual(await c.create(conv("conv_2"), [msg("x"), msg("x")]), {
        kind: "duplicate",
        index: 1,
        itemId: "x",
      });
      assert.equal(await c.get("conv_2"), undefined, "a refused create makes nothing");
      assert.deepEqual(await c.get("conv_1"), conv("conv_1", { a: "1" }));
      assert.deepEqual((await c.updateMetadata("conv_1", { b: "2" }))?.metadata, { b: "2" });
      assert.equal(await c.updateMetadata("conv_none", {}), undefined);
      assert.deepEqual((await c.items("conv_1"))!.map((i) => i.id), ["m1", "m2"]);
      assert.deepEqual(await c.item("conv_1", "m2"), msg("m2"));
      assert.deepEqual(await c.anyItem("m2"), msg("m2"));
      assert.equal(await c.deleteItem("conv_1", "m1"), true);
      assert.equal(await c.deleteItem("conv_1", "m1"), false);
      assert.equal(await c.delete("conv_1"), true);
      assert.equal(await c.delete("conv_1"), false);
      assert.equal(await c.items("conv_1"), undefined);
      assert.equal(await c.anyItem("m2"), undefined);
    } finally {
      await store.close();
    }
  },

  "conversations: appends keep order, refuse or skip held ids, and page both ways": async (db) => {
    const store = await db.open();
    const c = store.conversations;
    try {
      await c.create(conv("conv_p"), [msg("m0")]);
      assert.deepEqual(await c.append("conv_p", [msg("m1"), msg("m2")]), { kind: "appended" });
      assert.deepEqual(await c.append("conv_p", [msg("m3"), msg("m1")]), { kind: "duplicate", index: 1, itemId: "m1" });
      assert.deepEqual(await c.append("conv_p", [msg("m1", "again"), msg("m3"), msg("m3", "twice")], "skip"), {
        kind: "appended",
      });
      assert.deepEqual(await c.append("conv_none", [msg("q")]), { kind: "no_conversation" });
      assert.deepEqual((await c.items("conv_p"))!.map((i) => i.id), ["m0", "m1", "m2", "m3"]);
      assert.deepEqual(await c.item("conv_p", "m1"), msg("m1"));
      const page = await c.listItems("conv_p", { limit: 2, order: "asc", after: "m0" });
      assert.ok(page !== undefined && page !== "no_item");
      assert.deepEqual([page.data.map((i) => i.id), page.first_id, page.last_id, page.has_more], [
        ["m1", "m2"],
        "m1",
        "m2",
        true,
      ]);
      const desc = await c.listItems("conv_p", { limit: 10, order: "desc" });
      assert.ok(desc !== undefined && desc !== "no_item");
      assert.deepEqual(desc.data.map((i) => i.id), ["m3", "m2", "m1", "m0"]);
      assert.equal(desc.has_more, false);
      assert.equal(await c.listItems("conv_p", { limit: 1, order: "asc", after: "nope" }), "no_item");
      assert.equal(await c.listItems("conv_none", { limit: 1, order: "asc" }), undefined);
    } finally {
      await store.close();
    }
  },

  "ids holding a record separator and items with empty fields round-trip": async (db) => {
    const store = await db.open();
    try {
      const odd = "m\u001e1";
      await store.conversations.create(conv("conv_o"), [msg(odd, ""), msg("m2", "\u001e")]);
      assert.deepEqual(await store.conversations.items("conv_o"), [msg(odd, ""), msg("m2", "\u001e")]);
      assert.deepEqual(await store.conversations.append("conv_o", [msg(odd)]), {
        kind: "duplicate",
        index: 0,
        itemId: odd,
      });
      await store.create(inFlight("resp_\u001e"), [msg(odd)], null);
      store.appendLater("resp_\u001e", [event(0, "response.created")], inFlight("resp_\u001e", { status: "" }), fail);
      assert.deepEqual((await store.eventsAfter("resp_\u001e", -1)).map((e) => e.type), ["response.created"]);
      assert.equal((await store.get("resp_\u001e"))!.response.status, "");
      assert.deepEqual(await store.item(odd), msg(odd));
    } finally {
      await store.close();
    }
  },

  "conversations: appends from two servers at once stay contiguous": async (db) => {
    const a = await db.open();
    const b = await db.open();
    try {
      await a.conversations.create(conv("conv_c"), []);
      const turn = (store: ResponseStore, tag: string, i: number) =>
        store.conversations.append("conv_c", [msg(`${tag}${i}_in`), msg(`${tag}${i}_out`)]);
      await Promise.all(Array.from({ length: 10 }, (_, i) => [turn(a, "a", i), turn(b, "b", i)]).flat());
      const ids = (await b.conversations.items("conv_c"))!.map((i) => i.id as string);
      assert.equal(ids.length, 40);
      for (let k = 0; k < ids.length; k += 2) assert.equal(ids[k + 1], ids[k]!.replace("_in", "_out"));
    } finally {
      await a.close();
      await b.close();
    }
  },
};

for (const make of [sqliteBackend, postgresBackend]) {
  Deno.test(`store conformance: ${make === sqliteBackend ? "sqlite" : "postgres"}`, async (t) => {
    const backend = await make();
    try {
      for (const [name, body] of Object.entries(CASES)) {
        await t.step(name, async () => await body(await backend.fresh(), backend));
      }
    } finally {
      await backend.close();
    }
  });
}
