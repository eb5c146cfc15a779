/**
 * The access log: a streamed request is logged when its body ended (its real duration, not the time to headers),
 * with the response id and token counts; a failed request carries its reason; health probes log at debug level.
 */
import assert from "node:assert/strict";
import { Logger } from "../../server/logger.ts";
import type { AccessLogEntry } from "../../server/server.ts";
import { answerText, MODEL, postJson, startTestServer, tokenizer } from "../../testing/test_server.ts";

Deno.test("access log: streamed requests are logged at their end with id and token counts; 4xx with a reason", async () => {
  const log: AccessLogEntry[] = [];
  const script = tokenizer().encode(answerText("word ".repeat(20)));
  const t = startTestServer({ stepDelayMs: 10, chunking: "one", script, server: { onRequest: (e) => log.push(e) } });
  try {
    for (const path of ["/responses", "/chat/completions"]) {
      const body = path === "/responses"
        ? { model: MODEL, input: "hi", stream: true }
        : { model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true };
      const started = performance.now();
      const r = await postJson(`${t.baseURL}${path}`, body);
      const text = await r.text();
      const took = performance.now() - started;
      for (let i = 0; i < 50 && log.length === 0; i++) await new Promise((res) => setTimeout(res, 5));
      const entry = log.pop()!;
      assert.equal(entry.status, 200);
      assert.equal(entry.streamed, true);
      // ~30 steps of 10 ms: the logged time is the stream's, not the few ms to its headers.
      assert.ok(entry.ms > took * 0.7, `logged ${entry.ms.toFixed(0)} ms of a ${took.toFixed(0)} ms stream`);
      assert.ok(text.includes(entry.id!), `the logged id ${entry.id} is the stream's`);
      assert.ok(entry.input_tokens! > 0);
      assert.equal(entry.output_tokens, script.length);
    }
    const bad = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", temperature: 9 });
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
    const entry = log.pop()!;
    assert.equal(entry.status, 400);
    assert.match(entry.reason!, /^invalid_value: .*temperature/);
  } finally {
    await t.close();
  }
});

Deno.test("logger: debug lines are dropped at the info level, and json lines are JSON", () => {
  const lines: string[] = [];
  const info = new Logger("json", (l) => lines.push(l));
  info.debug("request", { route: "/health" });
  info.info("request", { route: "/v1/responses" });
  assert.equal(lines.length, 1);
  assert.equal(JSON.parse(lines[0]!).route, "/v1/responses");
  const debug = new Logger("text", (l) => lines.push(l), "debug");
  debug.debug("request", { route: "/health" });
  assert.match(lines[1]!, / debug request route=\/health$/);
});
