import assert from "node:assert/strict";
import { VERSION } from "../../server/version.ts";
import { MODEL, postJson, startTestServer } from "../../testing/test_server.ts";
import type { AccessLogEntry } from "../../server/server.ts";

Deno.test("--metrics-public serves /metrics without the API key; other routes still need it", async () => {
  for (const metricsPublic of [false, true]) {
    const t = startTestServer({ server: { apiKey: "sk-test", metricsPublic } });
    try {
      const m = await fetch(`${t.url}/metrics`);
      assert.equal(m.status, metricsPublic ? 200 : 401);
      if (metricsPublic) assert.match(await m.text(), /rill_/);
      else await m.body?.cancel();
      const models = await fetch(`${t.baseURL}/models`);
      assert.equal(models.status, 401);
      await models.body?.cancel();
    } finally {
      await t.close();
    }
  }
});

Deno.test("GET /version answers rill's version", async () => {
  const t = startTestServer();
  try {
    const r = await fetch(`${t.url}/version`);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { version: VERSION });
    assert.match(VERSION, /^\d+\.\d+\.\d+/);
  } finally {
    await t.close();
  }
});

Deno.test("x-request-id: echoed sanitised and capped, or generated; logged with the request", async () => {
  const log: AccessLogEntry[] = [];
  const t = startTestServer({ server: { onRequest: (e) => log.push(e) } });
  try {
    const sent = await fetch(`${t.baseURL}/models`, { headers: { "x-request-id": "abc-123_x.y:z" } });
    assert.equal(sent.headers.get("x-request-id"), "abc-123_x.y:z");
    await sent.body?.cancel();
    assert.equal(log.at(-1)?.requestId, "abc-123_x.y:z");

    const dirty = await fetch(`${t.baseURL}/models`, { headers: { "x-request-id": `a b"<script>${"7".repeat(300)}` } });
    const cleaned = dirty.headers.get("x-request-id")!;
    assert.equal(cleaned, `abscript${"7".repeat(120)}`);
    assert.equal(cleaned.length, 128);
    await dirty.body?.cancel();

    // Generated when absent (or when nothing usable was sent), on errors and streams too.
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    const id = r.headers.get("x-request-id");
    assert.match(id ?? "", /^[0-9a-f-]{36}$/);
    await r.text();
    assert.equal(log.at(-1)?.requestId, id);
    const e = await fetch(`${t.url}/nope`, { headers: { "x-request-id": "<>" } });
    assert.equal(e.status, 404);
    assert.match(e.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
    await e.body?.cancel();
  } finally {
    await t.close();
  }
});
