/**
 * Smaller request checks: an orphan function_call_output is a 400, unknown keys inside `reasoning` and `text` are
 * 400s naming them, and with an API key a 404/405 is only answered to an authenticated caller.
 */
import assert from "node:assert/strict";
import { MODEL, postJson, startTestServer } from "../../testing/test_server.ts";

Deno.test("a function_call_output whose call_id answers no call is a 400 naming it", async () => {
  const t = startTestServer();
  try {
    const r = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: [
        { role: "user", content: "hi" },
        { type: "function_call_output", call_id: "call_nowhere", output: "42" },
      ],
    });
    assert.equal(r.status, 400);
    const body = await r.json();
    assert.equal(body.error.param, "input[1].call_id");
    // Answering a call made earlier in the same input is fine.
    const ok = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: [
        { role: "user", content: "hi" },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "42" },
      ],
      store: false,
    });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("unknown keys inside reasoning and text are 400s naming them", async () => {
  const t = startTestServer();
  try {
    for (
      const [extra, param] of [
        [{ reasoning: { effort: "low", efort: "high" } }, "reasoning.efort"],
        [{ text: { verbosity: "low", colour: "blue" } }, "text.colour"],
      ] as const
    ) {
      const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", ...extra });
      assert.equal(r.status, 400);
      const body = await r.json();
      assert.equal(body.error.param, param);
      assert.equal(body.error.code, "unknown_parameter");
    }
  } finally {
    await t.close();
  }
});

Deno.test("with an API key, unknown paths and wrong methods answer 401 until the key is given", async () => {
  const t = startTestServer({ server: { apiKey: "sekret" } });
  try {
    const probes: [string, string][] = [["GET", "/v1/nope"], ["PUT", "/v1/responses"], ["DELETE", "/v1/models"]];
    for (const [method, path] of probes) {
      const anonymous = await fetch(`${t.url}${path}`, { method });
      assert.equal(anonymous.status, 401, `${method} ${path}`);
      await anonymous.body?.cancel();
      const keyed = await fetch(`${t.url}${path}`, { method, headers: { authorization: "Bearer sekret" } });
      assert.ok(keyed.status === 404 || keyed.status === 405, `${method} ${path}: ${keyed.status}`);
      await keyed.body?.cancel();
    }
    const health = await fetch(`${t.url}/health`);
    assert.equal(health.status, 200);
    await health.body?.cancel();
  } finally {
    await t.close();
  }
});
