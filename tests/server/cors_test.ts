import assert from "node:assert/strict";
import { MODEL, startTestServer } from "../../testing/test_server.ts";

const ALLOWED = "https://app.example";

async function preflight(url: string, origin: string): Promise<Response> {
  const r = await fetch(url, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization, content-type",
    },
  });
  await r.body?.cancel();
  return r;
}

function post(url: string, origin: string, body: unknown, key = "sk-test"): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { origin, "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
}

Deno.test("CORS: allowed origins get preflight answers and headers on every response, SSE included", async () => {
  const t = startTestServer({ server: { allowedOrigins: [ALLOWED, "https://other.example"], apiKey: "sk-test" } });
  try {
    // The preflight carries no API key, and is answered before auth and routing.
    const p = await preflight(`${t.baseURL}/responses`, ALLOWED);
    assert.equal(p.status, 204);
    assert.equal(p.headers.get("access-control-allow-origin"), ALLOWED);
    assert.match(p.headers.get("access-control-allow-methods") ?? "", /POST/);
    assert.equal(p.headers.get("access-control-allow-headers"), "authorization, content-type");

    const r = await post(`${t.baseURL}/responses`, ALLOWED, { model: MODEL, input: "hi" });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("access-control-allow-origin"), ALLOWED);
    assert.match(r.headers.get("access-control-expose-headers") ?? "", /x-request-id/);
    await r.body?.cancel();

    const s = await post(`${t.baseURL}/responses`, ALLOWED, { model: MODEL, input: "hi", stream: true });
    assert.equal(s.headers.get("content-type"), "text/event-stream");
    assert.equal(s.headers.get("access-control-allow-origin"), ALLOWED);
    assert.match(await s.text(), /response\.completed/);

    // Errors too, so a browser can read them.
    const e = await post(`${t.baseURL}/responses`, ALLOWED, { model: MODEL, input: "hi" }, "wrong");
    assert.equal(e.status, 401);
    assert.equal(e.headers.get("access-control-allow-origin"), ALLOWED);
    await e.body?.cancel();

    // Any other origin: no CORS header anywhere, and its preflight is an ordinary OPTIONS (405 here).
    const other = await preflight(`${t.baseURL}/responses`, "https://evil.example");
    assert.notEqual(other.status, 204);
    assert.equal(other.headers.get("access-control-allow-origin"), null);
    const o = await post(`${t.baseURL}/responses`, "https://evil.example", { model: MODEL, input: "hi" });
    assert.equal(o.headers.get("access-control-allow-origin"), null);
    await o.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("CORS: none by default; '*' allows any origin", async () => {
  const none = startTestServer();
  try {
    const p = await preflight(`${none.baseURL}/responses`, ALLOWED);
    assert.equal(p.headers.get("access-control-allow-origin"), null);
    const r = await fetch(`${none.baseURL}/models`, { headers: { origin: ALLOWED } });
    assert.equal(r.headers.get("access-control-allow-origin"), null);
    await r.body?.cancel();
  } finally {
    await none.close();
  }
  const any = startTestServer({ server: { allowedOrigins: ["*"] } });
  try {
    const p = await preflight(`${any.baseURL}/chat/completions`, "http://localhost:5173");
    assert.equal(p.status, 204);
    assert.equal(p.headers.get("access-control-allow-origin"), "http://localhost:5173");
    const r = await fetch(`${any.baseURL}/models`, { headers: { origin: "http://localhost:5173" } });
    assert.equal(r.headers.get("access-control-allow-origin"), "http://localhost:5173");
    await r.body?.cancel();
    // Without an Origin header (not a browser), nothing changes.
    const plain = await fetch(`${any.baseURL}/models`);
    assert.equal(plain.headers.get("access-control-allow-origin"), null);
    await plain.body?.cancel();
  } finally {
    await any.close();
  }
});
