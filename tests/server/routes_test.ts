/**
 * Served model names are often Hugging Face style (`org/name`): `GET /v1/models/{id}` must find them whether the
 * client sends the slash as is or percent-encoded (the OpenAI SDK encodes it), and chat requests naming them work.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { matchRoute } from "../../server/routes.ts";
import { startTestServer } from "../../testing/test_server.ts";

Deno.test("matchRoute: a model id may contain '/' (raw or %2F)", () => {
  for (const path of ["/v1/models/openai/tiny-chat", "/v1/models/openai%2Ftiny-chat"]) {
    const found = matchRoute("GET", path);
    assert.equal(found.kind, "match", path);
    if (found.kind === "match") assert.deepEqual(found.match, { route: "/v1/models/{id}", id: "openai/tiny-chat" });
  }
  assert.deepEqual(matchRoute("POST", "/v1/models/a/b"), { kind: "method", route: "/v1/models/{id}", allow: ["GET"] });
  // A malformed escape is an unknown model, not a crash.
  const bad = matchRoute("GET", "/v1/models/%E0%A4%A");
  assert.equal(bad.kind, "match");
});

Deno.test("GET /v1/models/{id} serves a model name with a slash, through the OpenAI SDK too", async () => {
  const t = startTestServer({ server: { modelId: "openai/tiny-chat" } });
  try {
    const client = new OpenAI({ baseURL: t.baseURL, apiKey: "unused" });
    const model = await client.models.retrieve("openai/tiny-chat");
    assert.equal(model.id, "openai/tiny-chat");
    const raw = await fetch(`${t.baseURL}/models/openai/tiny-chat`);
    assert.equal(raw.status, 200);
    assert.equal((await raw.json()).id, "openai/tiny-chat");
    const bad = await fetch(`${t.baseURL}/models/%E0%A4%A`);
    assert.equal(bad.status, 404);
    assert.equal((await bad.json()).error.code, "model_not_found");
  } finally {
    await t.close();
  }
});

Deno.test("GET /v1/models/{id} of an unknown model: 404 with code model_not_found, like a request naming it", async () => {
  const t = startTestServer();
  try {
    const r = await fetch(`${t.baseURL}/models/nope`);
    assert.equal(r.status, 404);
    const body = await r.json();
    assert.deepEqual([body.error.type, body.error.param, body.error.code], [
      "invalid_request_error",
      "model",
      "model_not_found",
    ]);
    assert.match(body.error.message, /'nope'/);
  } finally {
    await t.close();
  }
});

Deno.test("HEAD is answered like GET on GET routes (health checks, monitors), with no body", async () => {
  assert.equal(matchRoute("HEAD", "/health").kind, "match");
  assert.deepEqual(matchRoute("HEAD", "/v1/chat/completions"), {
    kind: "method",
    route: "/v1/chat/completions",
    allow: ["POST"],
  });
  const t = startTestServer();
  try {
    for (const path of ["/health", "/v1/models", "/metrics"]) {
      const r = await fetch(`${t.url}${path}`, { method: "HEAD" });
      assert.equal(r.status, 200, path);
      assert.equal(await r.text(), "");
    }
  } finally {
    await t.close();
  }
});
