import assert from "node:assert/strict";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";

const response = (id: string, status = "in_progress") => ({ id, object: "response", status, output: [] });
const event = (sequence_number: number, type: string) => ({ sequence_number, type, payload: `p${sequence_number}` });
const fail = (error: unknown) => {
  throw error;
};
const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 20));

Deno.test("store batching: queued writes are read back at once, in call order, interleaved across responses", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_a"), [], null);
  await store.create(response("resp_b"), [], null);
  store.appendLater("resp_a", [event(0, "response.created")], undefined, fail);
  store.appendLater("resp_b", [event(0, "response.created"), event(1, "response.in_progress")], undefined, fail);
  store.appendLater("resp_a", [event(1, "response.in_progress")], response("resp_a", "in_progress"), fail);
  store.appendLater("resp_b", [event(2, "response.completed")], response("resp_b", "completed"), fail);
  assert.deepEqual((await store.eventsAfter("resp_a", -1)).map((e) => e.sequence_number), [0, 1]);
  assert.deepEqual(await store.eventsAfter("resp_b", -1), [
    event(0, "response.created"),
    event(1, "response.in_progress"),
    event(2, "response.completed"),
  ]);
  assert.equal(await store.isTerminal("resp_b"), true);
  assert.equal((await store.get("resp_b"))?.response.status, "completed");
  // A direct write after queued ones lands after them.
  store.appendLater("resp_a", [event(2, "response.output_item.added")], undefined, fail);
  await store.appendEvents("resp_a", [event(3, "response.completed")]);
  assert.deepEqual((await store.eventsAfter("resp_a", 1)).map((e) => e.sequence_number), [2, 3]);
  await store.close();
});

Deno.test("store batching: queued writes commit on the next turn of the event loop, one transaction for all", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/rill.db`;
  const writer = SqliteStore.open(path);
  const reader = SqliteStore.open(path);
  try {
    await writer.create(response("resp_c"), [], null);
    await writer.create(response("resp_d"), [], null);
    writer.appendLater("resp_c", [event(0, "response.created")], undefined, fail);
    writer.appendLater("resp_d", [event(0, "response.created")], undefined, fail);
    // Another connection sees nothing yet: the steps cost no transaction of their own.
    assert.deepEqual(await reader.eventsAfter("resp_c", -1), []);
    await nextTurn();
    assert.deepEqual((await reader.eventsAfter("resp_c", -1)).map((e) => e.type), ["response.created"]);
    assert.deepEqual((await reader.eventsAfter("resp_d", -1)).map((e) => e.type), ["response.created"]);
  } finally {
    await writer.close();
    await reader.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("store batching: flush() makes queued writes durable now; close() flushes too", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/rill.db`;
  const writer = SqliteStore.open(path);
  const reader = SqliteStore.open(path);
  try {
    await writer.create(response("resp_e"), [], null);
    writer.appendLater("resp_e", [event(0, "response.created")], undefined, fail);
    writer.appendLater("resp_e", [event(1, "response.completed")], response("resp_e", "completed"), fail);
    await writer.flush();
    assert.equal(await reader.isTerminal("resp_e"), true);
    assert.equal((await reader.get("resp_e"))?.response.status, "completed");
    await writer.create(response("resp_f"), [], null);
    writer.appendLater("resp_f", [event(0, "response.created")], undefined, fail);
    await writer.close();
    assert.deepEqual((await reader.eventsAfter("resp_f", -1)).map((e) => e.sequence_number), [0]);
  } finally {
    await reader.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("store batching: a failing write is reported to its own caller; the other responses' writes are kept", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_g"), [], null);
  await store.create(response("resp_h"), [], null);
  await store.appendEvents("resp_g", [event(0, "response.created")]);
  const errors: { id: string; error: unknown }[] = [];
  const report = (id: string) => (error: unknown) => errors.push({ id, error });
  store.appendLater("resp_h", [event(0, "response.created")], undefined, report("resp_h"));
  // Sequence number 0 again: the primary key refuses it.
  store.appendLater("resp_g", [event(1, "response.in_progress"), event(0, "response.created")], undefined, report("g"));
  store.appendLater("resp_h", [event(1, "response.in_progress")], undefined, report("resp_h"));
  await store.flush();
  assert.equal(errors.length, 1);
  assert.equal(errors[0]!.id, "g");
  assert.deepEqual((await store.eventsAfter("resp_h", -1)).map((e) => e.sequence_number), [0, 1]);
  // The failing batch is all-or-nothing.
  assert.deepEqual((await store.eventsAfter("resp_g", -1)).map((e) => e.sequence_number), [0]);
  await store.close();
});

Deno.test("store batching: tail listeners hear about queued events once they are committed", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_i"), [], null);
  let heard = 0;
  const unsubscribe = store.subscribe("resp_i", () => heard++);
  store.appendLater("resp_i", [event(0, "response.created")], undefined, fail);
  assert.equal(heard, 0);
  await nextTurn();
  assert.equal(heard, 1);
  unsubscribe();
  await store.close();
});
