import assert from "node:assert/strict";
import { answerText, MODEL, postJson, startTestServer, tokenizer } from "../../testing/test_server.ts";

// ~400 one-token steps of 20 ms: far longer than the grace period plus the test's bound.
const LONG = () => tokenizer().encode(answerText("word ".repeat(400)));
const CHAT = { model: MODEL, messages: [{ role: "user", content: "hi" }] };

Deno.test("shutdown aborts a chat completion stream left after the grace period, ending it with an error", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one", script: LONG() });
  try {
    const r = await postJson(`${t.baseURL}/chat/completions`, { ...CHAT, stream: true });
    const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
    await reader.read();
    assert.equal(t.server.active(), 1);
    const rest = (async () => {
      let text = "";
      for (let c = await reader.read(); !c.done; c = await reader.read()) text += c.value;
      return text;
    })();
    const started = performance.now();
    await t.server.shutdown(50);
    const ms = performance.now() - started;
    assert.ok(ms < 2000, `shutdown took ${ms.toFixed(0)} ms: the chat generation was not aborted`);
    assert.ok(t.engine.requests[0]!.signal!.aborted);
    const tail = await rest;
    assert.doesNotMatch(tail, /"finish_reason":"stop"/);
    assert.match(tail, /data: \{"error":\{[^\n]*"code":"service_unavailable"\}\}\n\ndata: \[DONE\]\n\n$/);
    assert.equal(t.server.active(), 0);
  } finally {
    await t.close();
  }
});

Deno.test("shutdown answers a non-streamed chat completion cut off by the grace period with 503", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one", script: LONG() });
  try {
    const pending = postJson(`${t.baseURL}/chat/completions`, CHAT);
    for (let i = 0; i < 100 && t.server.active() === 0; i++) await new Promise((res) => setTimeout(res, 10));
    assert.equal(t.server.active(), 1);
    await t.server.shutdown(50);
    const r = await pending;
    assert.equal(r.status, 503);
    assert.equal((await r.json()).error.code, "service_unavailable");
  } finally {
    await t.close();
  }
});
