/**
 * `item_reference` input items: the store finds an item by id (output items of stored responses first, then stored
 * input items), and a request that references one is prepared exactly as if the item had been sent in full.
 */
import assert from "node:assert/strict";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";
import { ANSWER, MODEL, postJson, REASONING, startTestServer, tokenizer } from "../../../testing/test_server.ts";

const reasoning = { id: "rs_1", type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "think" }] };
const message = {
  id: "msg_1",
  type: "message",
  role: "assistant",
  status: "completed",
  content: [{ type: "output_text", text: "hello", annotations: [] }],
};

Deno.test("store: item() finds output items of a stored snapshot, then input items, until the response is deleted", async () => {
  const store = SqliteStore.open(":memory:");
  try {
    await store.create({ id: "resp_1", status: "in_progress", output: [] }, [{ id: "msg_in", type: "message" }], null);
    assert.equal(await store.item("rs_1"), undefined);
    await store.update("resp_1", { id: "resp_1", status: "completed", output: [reasoning, message] });
    assert.deepEqual(await store.item("rs_1"), reasoning);
    assert.deepEqual(await store.item("msg_1"), message);
    assert.deepEqual(await store.item("msg_in"), { id: "msg_in", type: "message" });
    // A later snapshot of the same response replaces its items (a cancelled response keeps what was finished).
    await store.update("resp_1", { id: "resp_1", status: "completed", output: [{ ...message, status: "incomplete" }] });
    assert.equal((await store.item("msg_1"))?.status, "incomplete");
    assert.ok(await store.delete("resp_1"));
    for (const id of ["rs_1", "msg_1", "msg_in"]) assert.equal(await store.item(id), undefined, id);
  } finally {
    await store.close();
  }
});

Deno.test("store: referenced items survive reopening the database", async () => {
  const dir = Deno.makeTempDirSync();
  const path = `${dir}/store.sqlite`;
  try {
    const first = SqliteStore.open(path);
    await first.create({ id: "resp_1", status: "in_progress", output: [] }, [], null);
    await first.update("resp_1", { id: "resp_1", status: "completed", output: [message] });
    await first.close();
    const second = SqliteStore.open(path);
    assert.deepEqual(await second.item("msg_1"), message);
    await second.close();
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("item_reference: a referenced output item is expanded into the prompt and listed as the full item", async () => {
  const t = startTestServer();
  try {
    const first = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" })).json();
    const ids = (first.output as { id: string; type: string }[]).map((item) => item.id);
    assert.deepEqual(first.output.map((item: { type: string }) => item.type), ["reasoning", "message"]);
    const input = [
      { role: "user", content: "hi" },
      ...ids.map((id) => ({ type: "item_reference", id })),
      { role: "user", content: "again" },
    ];
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input });
    assert.equal(r.status, 200, await r.clone().text());
    const second = await r.json();
    const prompt = tokenizer().decode(t.engine.requests[1]!.promptTokens);
    assert.ok(prompt.includes(`<|channel|>final<|message|>${ANSWER}<|end|>`), prompt);

    const items = await (await fetch(`${t.baseURL}/responses/${second.id}/input_items?order=asc`)).json();
    assert.deepEqual(items.data.map((item: { type: string }) => item.type), [
      "message",
      "reasoning",
      "message",
      "message",
    ]);
    assert.deepEqual(items.data[1].content, [{ type: "reasoning_text", text: REASONING }]);
    assert.equal(items.data[2].id, ids[1]);

    // input_tokens resolves references the same way: the count is that of the expanded conversation.
    const counted = await (await postJson(`${t.baseURL}/responses/input_tokens`, { model: MODEL, input })).json();
    assert.equal(counted.input_tokens, t.engine.requests[1]!.promptTokens.length);
  } finally {
    await t.close();
  }
});

Deno.test("item_reference: items of a response created with store false cannot be referenced", async () => {
  const t = startTestServer();
  try {
    const first = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", store: false })).json();
    const id = first.output.at(-1).id;
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: [{ type: "item_reference", id }] });
    assert.equal(r.status, 404);
    const error = (await r.json()).error;
    assert.equal(error.param, "input[0].id");
    assert.equal(error.message, `Item with id '${id}' not found.`);
  } finally {
    await t.close();
  }
});
