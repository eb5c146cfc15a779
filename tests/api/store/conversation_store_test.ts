import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";
import type { Conversation } from "../../../api/store/conversation_store.ts";

function conv(id: string, metadata: Record<string, string> = {}): Conversation {
  return { id, object: "conversation", created_at: 1_700_000_000, metadata };
}

function msg(id: string, text = id): Record<string, unknown> {
  return {
    id,
    type: "message",
    role: "user",
    status: "completed",
    content: [{ type: "input_text", text }],
  };
}

async function withFile(body: (path: string) => void | Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rill-conv-" });
  try {
    await body(`${dir}/store.db`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const ids = (items: readonly Record<string, unknown>[] | undefined) => items?.map((item) => item.id);

Deno.test("conversation store: create, get, update metadata, delete with its items", async () => {
  const store = SqliteStore.open(":memory:");
  try {
    const c = store.conversations;
    assert.deepEqual(
      await c.create(conv("conv_1", { topic: "x" }), [msg("m1"), msg("m2")]),
      conv("conv_1", { topic: "x" }),
    );
    assert.deepEqual(await c.get("conv_1"), conv("conv_1", { topic: "x" }));
    assert.deepEqual(ids(await c.items("conv_1")), ["m1", "m2"]);
    assert.deepEqual(await c.item("conv_1", "m2"), msg("m2"));
    assert.deepEqual((await c.updateMetadata("conv_1", { topic: "y" }))?.metadata, { topic: "y" });
    assert.equal(await c.updateMetadata("conv_nope", {}), undefined);
    assert.equal(await c.get("conv_nope"), undefined);
    assert.equal(await c.items("conv_nope"), undefined);
    assert.equal(await c.delete("conv_1"), true);
    assert.equal(await c.delete("conv_1"), false);
    assert.equal(await c.get("conv_1"), undefined);
    assert.equal(await c.item("conv_1", "m1"), undefined);
  } finally {
    await store.close();
  }
});

Deno.test("conversation store: appends keep order; a duplicate id appends nothing, or is skipped when asked", async () => {
  const store = SqliteStore.open(":memory:");
  try {
    const c = store.conversations;
    await c.create(conv("conv_1"), [msg("m1")]);
    assert.deepEqual(await c.append("conv_1", [msg("m2"), msg("m3")]), { kind: "appended" });
    assert.deepEqual(await c.append("conv_1", [msg("m4"), msg("m2")]), { kind: "duplicate", index: 1, itemId: "m2" });
    assert.deepEqual(await c.append("conv_1", [msg("m5"), msg("m5")]), { kind: "duplicate", index: 1, itemId: "m5" });
    assert.deepEqual(ids(await c.items("conv_1")), ["m1", "m2", "m3"], "a refused append adds nothing");
    assert.deepEqual(await c.append("conv_1", [msg("m2", "again"), msg("m4"), msg("m4", "twice")], "skip"), {
      kind: "appended",
    });
    assert.deepEqual(ids(await c.items("conv_1")), ["m1", "m2", "m3", "m4"]);
    assert.deepEqual(await c.item("conv_1", "m2"), msg("m2"), "a skipped item leaves the held one as it was");
    assert.deepEqual(await c.item("conv_1", "m4"), msg("m4"), "of a repeated id, the first is kept");
    assert.deepEqual(await c.anyItem("m3"), msg("m3"));
    assert.equal(await c.anyItem("nope"), undefined);
    assert.deepEqual(await c.append("conv_nope", [msg("x")]), { kind: "no_conversation" });
    // A deleted item's id may come back; positions keep growing, so the order stays the order of appends.
    assert.equal(await c.deleteItem("conv_1", "m1"), true);
    assert.equal(await c.deleteItem("conv_1", "m1"), false);
    await c.append("conv_1", [msg("m1")]);
    assert.deepEqual(ids(await c.items("conv_1")), ["m2", "m3", "m4", "m1"]);
    // Ids are unique per conversation, not across them.
    assert.deepEqual(await c.create(conv("conv_2"), [msg("m2")]), conv("conv_2"));
    assert.deepEqual(await c.create(conv("conv_3"), [msg("a"), msg("a")]), {
      kind: "duplicate",
      index: 1,
      itemId: "a",
    });
    assert.equal(await c.get("conv_3"), undefined, "a refused create creates nothing");
  } finally {
    await store.close();
  }
});

Deno.test("conversation store: cursor pages in both orders", async () => {
  const store = SqliteStore.open(":memory:");
  try {
    const c = store.conversations;
    await c.create(conv("conv_1"), ["a", "b", "c", "d", "e"].map((id) => msg(id)));
    const asc = await c.listItems("conv_1", { limit: 2, order: "asc" });
    assert.ok(asc !== undefined && asc !== "no_item");
    assert.deepEqual([ids(asc.data), asc.first_id, asc.last_id, asc.has_more], [["a", "b"], "a", "b", true]);
    const next = await c.listItems("conv_1", { limit: 2, order: "asc", after: "b" });
    assert.ok(next !== undefined && next !== "no_item");
    assert.deepEqual(ids(next.data), ["c", "d"]);
    const last = await c.listItems("conv_1", { limit: 2, order: "asc", after: "d" });
    assert.ok(last !== undefined && last !== "no_item");
    assert.deepEqual([ids(last.data), last.has_more], [["e"], false]);
    const desc = await c.listItems("conv_1", { limit: 3, order: "desc" });
    assert.ok(desc !== undefined && desc !== "no_item");
    assert.deepEqual([ids(desc.data), desc.has_more], [["e", "d", "c"], true]);
    const descNext = await c.listItems("conv_1", { limit: 3, order: "desc", after: "c" });
    assert.ok(descNext !== undefined && descNext !== "no_item");
    assert.deepEqual([ids(descNext.data), descNext.has_more], [["b", "a"], false]);
    const exact = await c.listItems("conv_1", { limit: 5, order: "asc" });
    assert.ok(exact !== undefined && exact !== "no_item");
    assert.equal(exact.has_more, false, "a page that ends exactly at the last item has no more");
    assert.equal(await c.listItems("conv_1", { limit: 2, order: "asc", after: "zz" }), "no_item");
    assert.equal(await c.listItems("conv_nope", { limit: 2, order: "asc" }), undefined);
    await c.create(conv("conv_empty"), []);
    const empty = await c.listItems("conv_empty", { limit: 2, order: "desc" });
    assert.ok(empty !== undefined && empty !== "no_item");
    assert.deepEqual(empty, { data: [], first_id: null, last_id: null, has_more: false });
  } finally {
    await store.close();
  }
});

Deno.test("conversation store: two servers appending to one conversation in turn lose nothing", async () => {
  await withFile(async (path) => {
    const a = SqliteStore.open(path);
    const b = SqliteStore.open(path);
    try {
      await a.conversations.create(conv("conv_1"), []);
      for (let turn = 0; turn < 20; turn++) {
        const store = turn % 2 === 0 ? a : b;
        await store.conversations.append("conv_1", [msg(`in_${turn}`), msg(`out_${turn}`)]);
      }
      const all = ids(await a.conversations.items("conv_1"));
      assert.equal(all?.length, 40);
      // Each append's items stay together, in the order given.
      for (let turn = 0; turn < 20; turn++) {
        const at = all!.indexOf(`in_${turn}`);
        assert.equal(all![at + 1], `out_${turn}`);
      }
      assert.deepEqual(ids(await b.conversations.items("conv_1")), all);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

Deno.test("conversation store: a file from before conversations gains them at open, its responses kept", async () => {
  await withFile(async (path) => {
    const old = new DatabaseSync(path);
    old.exec(
      "CREATE TABLE responses (id TEXT PRIMARY KEY, response TEXT NOT NULL, conversation TEXT NOT NULL, " +
        "terminal INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);",
    );
    old.prepare("INSERT INTO responses VALUES (?, ?, ?, 1, ?)").run(
      "resp_old",
      JSON.stringify({ id: "resp_old", object: "response", status: "completed", output: [] }),
      JSON.stringify({ version: 1, items: [] }),
      Date.now(),
    );
    await old.close();
    const store = SqliteStore.open(path);
    assert.equal((await store.get("resp_old"))?.response.status, "completed");
    await store.conversations.create(conv("conv_1"), [msg("m1")]);
    await store.close();
    const reopened = SqliteStore.open(path);
    assert.deepEqual(ids(await reopened.conversations.items("conv_1")), ["m1"]);
    assert.equal((await reopened.get("resp_old"))?.response.status, "completed");
    await reopened.close();
  });
});
