/**
 * Every generation cut by shutdown ends in a way its client can tell from a finished one: Responses streams with
 * `error` (code server_shutting_down) + `response.failed`, non-streamed requests with a 503, background responses
 * stored `failed`; while draining, new requests get 503 + Retry-After instead of a refused connection.
 */
import assert from "node:assert/strict";
import { answerText, MODEL, postJson, startTestServer, tokenizer } from "../../testing/test_server.ts";

const LONG = () => tokenizer().encode(answerText("word ".repeat(400)));

function events(text: string): { type: string; [key: string]: unknown }[] {
  return text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
}

async function until(check: () => boolean, ms = 3000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

Deno.test("shutdown: cut Responses streams end with error + response.failed, stored failed", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one", script: LONG() });
  try {
    const streams = await Promise.all(
      Array.from({ length: 6 }, () => postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true })),
    );
    const texts = streams.map((r) => r.text());
    await until(() => t.server.active() === 6);
    await new Promise((r) => setTimeout(r, 60));
    await t.server.shutdown(30);
    for (const text of await Promise.all(texts)) {
      const list = events(text);
      const last = list.at(-1)!;
      assert.equal(last.type, "response.failed");
      const error = list.at(-2)!;
      assert.equal(error.type, "error");
      assert.equal(error.code, "server_shutting_down");
      const response = last.response as { id: string; status: string; error: { code: string } };
      assert.equal(response.status, "failed");
      assert.equal(response.error.code, "server_error");
      assert.equal((await t.store.get(response.id))!.response.status, "failed");
    }
  } finally {
    await t.close();
  }
});

Deno.test("shutdown: a cut non-streamed response is a 503 and a cut background response is stored failed", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one", script: LONG() });
  try {
    const pending = postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" });
    const background = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", background: true }))
      .json();
    await until(() => t.server.active() === 2);
    await t.server.shutdown(30);
    const r = await pending;
    assert.equal(r.status, 503);
    assert.equal(r.headers.get("retry-after"), "1");
    assert.equal((await r.json()).error.code, "server_shutting_down");
    const stored = (await t.store.get(background.id))!.response as { status: string; error: { message: string } };
    assert.equal(stored.status, "failed");
    assert.match(stored.error.message, /shut down/);
    const log = await t.store.eventsAfter(background.id, -1);
    assert.equal(log.at(-1)!.type, "response.failed");
  } finally {
    await t.close();
  }
});

Deno.test("shutdown: while draining, new requests get 503 with Retry-After until the listener closes", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one", script: LONG() });
  try {
    const running = postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    await until(() => t.server.active() === 1);
    const stopping = t.server.shutdown(300);
    await new Promise((r) => setTimeout(r, 30));
    for (const path of ["/v1/responses", "/v1/chat/completions"]) {
      const r = await postJson(`${t.url}${path}`, { model: MODEL, input: "hi" });
      assert.equal(r.status, 503);
      assert.equal(r.headers.get("retry-after"), "1");
      assert.equal((await r.json()).error.code, "service_unavailable");
    }
    const models = await fetch(`${t.baseURL}/models`);
    assert.equal(models.status, 503);
    await models.body?.cancel();
    const health = await fetch(`${t.url}/health`);
    assert.equal((await health.json()).status, "draining");
    await (await running).body?.cancel();
    await stopping;
  } finally {
    await t.close();
  }
});
