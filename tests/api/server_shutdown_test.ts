import assert from "node:assert/strict";
import { answerText, MODEL, startTestServer, tokenizer } from "./test_server.ts";

Deno.test("shutdown aborts a chat completion still streaming after the grace period", async () => {
  // ~400 one-token steps of 20 ms: far longer than the grace period plus the test's bound.
  const script = tokenizer().encode(answerText("word ".repeat(400)));
  const t = startTestServer({ stepDelayMs: 20, chunking: "one", script });
  try {
    const r = await fetch(`${t.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    const reader = r.body!.getReader();
    await reader.read();
    assert.equal(t.server.active(), 1);
    const drained = reader.closed.catch(() => {});
    (async () => {
      while (!(await reader.read().catch(() => ({ done: true }))).done) { /* drain */ }
    })();
    const started = performance.now();
    await t.server.shutdown(50);
    const ms = performance.now() - started;
    assert.ok(ms < 2000, `shutdown took ${ms.toFixed(0)} ms: the chat generation was not aborted`);
    assert.ok(t.engine.requests[0]!.signal!.aborted);
    await drained;
    assert.equal(t.server.active(), 0);
  } finally {
    await t.close();
  }
});
