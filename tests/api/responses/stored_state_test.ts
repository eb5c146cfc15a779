/**
 * Stored state tells the truth about a response's end, decided once from its cause and written at the time: a
 * client that goes away leaves its stored response "cancelled" (never failed/server_error, never in_progress), and
 * the replay of a cancelled response ends with a terminal event.
 */
import assert from "node:assert/strict";
import { answerText, MODEL, postJson, startTestServer, tokenizer } from "../../../testing/test_server.ts";

const LONG = () => tokenizer().encode(answerText("word ".repeat(400)));

async function until(check: () => Promise<boolean>, ms = 3000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!await check() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

async function statusOf(t: ReturnType<typeof startTestServer>, id: string): Promise<unknown> {
  return (await t.store.get(id))?.response.status;
}

Deno.test("stored state: streams cut by their clients are cancelled, with a terminal event in the log", async () => {
  const t = startTestServer({ stepDelayMs: 5, chunking: "one", script: LONG() });
  try {
    const ids = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
      const controller = new AbortController();
      const r = await fetch(`${t.baseURL}/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, input: "hi", stream: true }),
        signal: controller.signal,
      });
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes("output_text.delta")) text += (await reader.read()).value;
      await new Promise((res) => setTimeout(res, i * 3));
      controller.abort();
      await reader.cancel().catch(() => {});
      return /"id":"(resp_[^"]+)"/.exec(text)![1]!;
    }));
    await until(() => Promise.resolve(t.server.active() === 0));
    for (const id of ids) {
      assert.equal(await statusOf(t, id), "cancelled", id);
      const log = await t.store.eventsAfter(id, -1);
      assert.equal(log.at(-1)!.type, "response.failed");
      assert.equal(log.filter((e) => e.type === "response.failed").length, 1);
    }
  } finally {
    await t.close();
  }
});

Deno.test("stored state: a non-streamed stored response whose client went away is cancelled", async () => {
  const t = startTestServer({ stepDelayMs: 5, chunking: "one", script: LONG() });
  try {
    const controller = new AbortController();
    const pending = fetch(`${t.baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input: "hi" }),
      signal: controller.signal,
    }).catch(() => null);
    await until(() => Promise.resolve(t.engine.requests.length === 1));
    await new Promise((r) => setTimeout(r, 30));
    controller.abort();
    await pending;
    await until(() => Promise.resolve(t.server.active() === 0));
    const id = t.engine.requests[0]!.id;
    assert.equal(await statusOf(t, id), "cancelled");
    const got = await (await fetch(`${t.baseURL}/responses/${id}`)).json();
    assert.equal(got.status, "cancelled");
    assert.equal(got.error, null);
  } finally {
    await t.close();
  }
});

Deno.test("stored state: the replay of a cancelled background response ends with a terminal event", async () => {
  const t = startTestServer({ stepDelayMs: 5, chunking: "one", script: LONG() });
  try {
    const created = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", background: true }))
      .json();
    await new Promise((r) => setTimeout(r, 30));
    const cancelled = await (await fetch(`${t.baseURL}/responses/${created.id}/cancel`, { method: "POST" })).json();
    assert.equal(cancelled.status, "cancelled");
    const replay = await (await fetch(`${t.baseURL}/responses/${created.id}?stream=true`)).text();
    const types = replay.split("\n").filter((l) => l.startsWith("event: ")).map((l) => l.slice(7));
    assert.equal(types[0], "response.created");
    assert.equal(types.at(-1), "response.failed");
    const last = JSON.parse(replay.trim().split("\n").at(-1)!.slice(6));
    assert.equal(last.response.status, "cancelled");
  } finally {
    await t.close();
  }
});
