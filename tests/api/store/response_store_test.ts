import assert from "node:assert/strict";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";

const response = (id: string, status = "in_progress") => ({ id, object: "response", status, output: [] });
const event = (sequence_number: number, type: string) => ({ sequence_number, type, payload: `p${sequence_number}` });

Deno.test("store: create, get, update and delete a response", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_1"), [{ type: "message", role: "user", content: "hi" }], { messages: [] });
  assert.deepEqual(await store.get("resp_1"), { response: response("resp_1"), conversation: { messages: [] } });
  await store.update("resp_1", response("resp_1", "completed"));
  assert.equal((await store.get("resp_1"))?.response.status, "completed");
  assert.equal(await store.delete("resp_1"), true);
  assert.equal(await store.get("resp_1"), undefined);
  assert.equal(await store.delete("resp_1"), false);
  await store.close();
});

Deno.test("store: event log replays exactly the suffix after starting_after and marks terminal", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_2"), [], null);
  await store.appendEvents("resp_2", [event(0, "response.created"), event(1, "response.in_progress")]);
  assert.equal(await store.isTerminal("resp_2"), false);
  await store.appendEvents("resp_2", [event(2, "response.output_item.added"), event(3, "response.completed")]);
  assert.equal(await store.isTerminal("resp_2"), true);
  assert.deepEqual((await store.eventsAfter("resp_2", -1)).map((e) => e.sequence_number), [0, 1, 2, 3]);
  assert.deepEqual(await store.eventsAfter("resp_2", 1), [
    event(2, "response.output_item.added"),
    event(3, "response.completed"),
  ]);
  assert.deepEqual(await store.eventsAfter("resp_2", 3), []);
  await store.close();
});

Deno.test("store: a duplicated sequence number is rejected and nothing of that batch is kept", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_3"), [], null);
  await store.appendEvents("resp_3", [event(0, "response.created")]);
  await assert.rejects(async () =>
    await store.appendEvents("resp_3", [event(1, "response.in_progress"), event(0, "response.created")])
  );
  assert.deepEqual((await store.eventsAfter("resp_3", -1)).map((e) => e.sequence_number), [0]);
  await store.close();
});

Deno.test("store: input items paginate with limit, order and after", async () => {
  const store = SqliteStore.open(":memory:");
  const items = ["a", "b", "c", "d"].map((id) => ({ id: `msg_${id}`, type: "message", role: "user", content: id }));
  await store.create(response("resp_4"), items, null);
  const first = await store.listInputItems("resp_4", { limit: 2, order: "asc" });
  assert.deepEqual(first?.data.map((i) => i.id), ["msg_a", "msg_b"]);
  assert.equal(first?.has_more, true);
  assert.equal(first?.first_id, "msg_a");
  assert.equal(first?.last_id, "msg_b");
  const second = await store.listInputItems("resp_4", { limit: 2, order: "asc", after: "msg_b" });
  assert.deepEqual(second?.data.map((i) => i.id), ["msg_c", "msg_d"]);
  assert.equal(second?.has_more, false);
  const desc = await store.listInputItems("resp_4", { limit: 10, order: "desc" });
  assert.deepEqual(desc?.data.map((i) => i.id), ["msg_d", "msg_c", "msg_b", "msg_a"]);
  assert.equal(await store.listInputItems("resp_missing", { limit: 10, order: "asc" }), undefined);
  await store.close();
});

Deno.test("store: items without an id get a stable generated one", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_5"), [{ type: "message", role: "user", content: "x" }], null);
  const page = await store.listInputItems("resp_5", { limit: 10, order: "asc" });
  assert.equal(page?.data[0]?.id, "resp_5_item_0");
  assert.deepEqual(await store.listInputItems("resp_5", { limit: 10, order: "asc" }), page);
  await store.close();
});

Deno.test("store: subscribers hear appends until they unsubscribe", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_6"), [], null);
  let calls = 0;
  const off = store.subscribe("resp_6", () => calls++);
  await store.appendEvents("resp_6", [event(0, "response.created")]);
  await store.appendEvents("resp_6", []);
  off();
  await store.appendEvents("resp_6", [event(1, "response.in_progress")]);
  assert.equal(calls, 1);
  await store.close();
});

Deno.test("store: a terminal event survives kill -9 of the writing process", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/rill.db`;
  const script = `
    import { SqliteStore } from ${JSON.stringify(new URL("../../../api/store/sqlite_store.ts", import.meta.url).href)};
    const store = SqliteStore.open(${JSON.stringify(path)});
    await store.create({ id: "resp_k", status: "in_progress" }, [{ type: "message", role: "user", content: "q" }], { turns: 1 });
    await store.appendEvents("resp_k", [{ sequence_number: 0, type: "response.created" }, { sequence_number: 1, type: "response.completed" }]);
    await store.update("resp_k", { id: "resp_k", status: "completed" });
    console.log("written");
    setInterval(() => {}, 1000);
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "-"],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(script));
  await writer.close();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("written")) {
    const { value, done } = await reader.read();
    if (done) break;
    out += value;
  }
  assert.match(out, /written/);
  child.kill("SIGKILL");
  await child.status;
  await reader.cancel();

  const store = SqliteStore.open(path);
  assert.equal((await store.get("resp_k"))?.response.status, "completed");
  assert.deepEqual((await store.get("resp_k"))?.conversation, { turns: 1 });
  assert.equal(await store.isTerminal("resp_k"), true);
  assert.deepEqual((await store.eventsAfter("resp_k", -1)).map((e) => e.type), [
    "response.created",
    "response.completed",
  ]);
  await store.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("store: writes for a deleted response (its generation still ending) leave nothing behind", async () => {
  const store = SqliteStore.open(":memory:");
  await store.create(response("resp_gone"), [], null);
  await store.appendEvents("resp_gone", [event(0, "response.created")]);
  assert.equal(await store.delete("resp_gone"), true);
  const item = { id: "msg_gone", type: "message", role: "assistant", content: [] };
  await store.appendEvents("resp_gone", [event(1, "response.output_item.done")]);
  store.appendLater(
    "resp_gone",
    [event(2, "response.completed")],
    { ...response("resp_gone"), output: [item] },
    (e) => {
      throw e;
    },
  );
  await store.update("resp_gone", { ...response("resp_gone", "cancelled"), output: [item] });
  await store.flush();
  assert.equal(await store.get("resp_gone"), undefined);
  assert.deepEqual(await store.eventsAfter("resp_gone", -1), []);
  assert.equal(await store.isTerminal("resp_gone"), false);
  assert.equal(await store.item("msg_gone"), undefined, "an item of a deleted response must not be referenceable");
  await store.close();
});
