/**
 * The WebSocket upgrade of `/v1/responses` checks `Origin`: browsers apply no CORS to WebSockets, so without this a
 * cross-site page could drive a local rill. No Origin (non-browser clients) or an `--allowed-origins` origin opens the
 * socket; any other Origin is refused with a 403 OpenAI-shaped error before upgrading.
 */
import assert from "node:assert/strict";
import { startTestServer, type TestServer } from "../../../testing/test_server.ts";

/** Whether a WebSocket with these request headers opens. */
async function opens(t: TestServer, headers: Record<string, string>): Promise<boolean> {
  // Deno's WebSocket takes request headers as a second argument (not in the DOM typings).
  const ws = new WebSocket(`${t.url.replace(/^http/, "ws")}/v1/responses`, { headers } as unknown as string[]);
  const closed = new Promise((resolve) => ws.addEventListener("close", resolve));
  const opened = await new Promise<boolean>((resolve) => {
    ws.addEventListener("open", () => resolve(true));
    ws.addEventListener("error", () => resolve(false));
  });
  if (ws.readyState !== WebSocket.CLOSED) ws.close();
  await closed;
  return opened;
}

/** The plain HTTP answer to an upgrade request from `origin` (the check runs before the upgrade). */
async function upgradeAnswer(t: TestServer, origin: string): Promise<Response> {
  return await fetch(`${t.url}/v1/responses`, {
    headers: {
      origin,
      upgrade: "websocket",
      connection: "Upgrade",
      "sec-websocket-version": "13",
      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
    },
  });
}

Deno.test("websocket origin: no Origin opens, a foreign Origin gets a 403 error, with no origins allowed", async () => {
  const t = startTestServer();
  try {
    assert.equal(await opens(t, {}), true);
    assert.equal(await opens(t, { origin: "https://evil.example" }), false);
    const refused = await upgradeAnswer(t, "https://evil.example");
    assert.equal(refused.status, 403);
    const body = await refused.json();
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(body.error.code, "origin_not_allowed");
    assert.match(body.error.message, /evil\.example/);
  } finally {
    await t.close();
  }
});

Deno.test("websocket origin: an --allowed-origins origin opens (case-insensitively), others are refused", async () => {
  const t = startTestServer({ server: { allowedOrigins: ["https://app.example"] } });
  try {
    assert.equal(await opens(t, { origin: "https://app.example" }), true);
    assert.equal(await opens(t, { origin: "https://APP.example" }), true);
    assert.equal(await opens(t, { origin: "https://app.example.evil" }), false);
    assert.equal((await upgradeAnswer(t, "http://localhost:3000")).status, 403);
  } finally {
    await t.close();
  }
  const any = startTestServer({ server: { allowedOrigins: ["*"] } });
  try {
    assert.equal(await opens(any, { origin: "https://anything.example" }), true);
  } finally {
    await any.close();
  }
});
