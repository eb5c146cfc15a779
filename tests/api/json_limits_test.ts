/**
 * Deeply nested request JSON is a 400 naming the parameter, never a stack overflow (500) or seconds of rendering:
 * tool schemas nested thousands deep through `properties` or `oneOf`, and 10,000-deep JSON anywhere in a body.
 */
import assert from "node:assert/strict";
import { MAX_SCHEMA_DEPTH } from "../../api/json_limits.ts";
import { MODEL, postJson, startTestServer } from "../../testing/test_server.ts";

function nestedProperties(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < depth; i++) schema = { type: "object", properties: { a: schema } };
  return schema;
}

function nestedOneOf(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < depth; i++) schema = { oneOf: [schema, { type: "number" }] };
  return schema;
}

/** A JSON text nesting `depth` arrays, built as text: JSON.stringify of such a value would overflow itself. */
function deepArrayText(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth);
}

async function errorOf(r: Response): Promise<{ status: number; param: unknown; code: unknown }> {
  const body = await r.json();
  return { status: r.status, param: body.error?.param, code: body.error?.code };
}

Deno.test("json limits: tool schemas nested thousands deep are 400s naming the parameter, quickly", async () => {
  const t = startTestServer();
  try {
    for (const schema of [nestedProperties(3000), nestedOneOf(2000)]) {
      const started = performance.now();
      const responses = await postJson(`${t.baseURL}/responses`, {
        model: MODEL,
        input: "hi",
        tools: [{ type: "function", name: "f", parameters: schema }],
      });
      assert.deepEqual(await errorOf(responses), { status: 400, param: "tools", code: "nesting_too_deep" });
      const chat = await postJson(`${t.baseURL}/chat/completions`, {
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        tools: [{ type: "function", function: { name: "f", parameters: schema } }],
      });
      assert.deepEqual(await errorOf(chat), { status: 400, param: "tools", code: "nesting_too_deep" });
      assert.ok(performance.now() - started < 2000);
    }
    // Within the body limit but deeper than a schema may be: named down to the schema.
    const r = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      tools: [{ type: "function", name: "f", parameters: nestedProperties(MAX_SCHEMA_DEPTH / 2) }],
    });
    assert.deepEqual(await errorOf(r), { status: 400, param: "tools[0].parameters", code: "schema_too_deep" });
    const c = await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "f", parameters: nestedOneOf(MAX_SCHEMA_DEPTH / 2) } }],
    });
    assert.deepEqual(await errorOf(c), {
      status: 400,
      param: "tools[0].function.parameters",
      code: "schema_too_deep",
    });
    // A schema of ordinary depth still works.
    const fine = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      tools: [{ type: "function", name: "f", parameters: nestedProperties(5) }],
    });
    assert.equal(fine.status, 200);
    await fine.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("json limits: 10,000-deep JSON in any field is a 400 naming it, and the server keeps serving", async () => {
  const t = startTestServer();
  try {
    const deep = deepArrayText(10_000);
    const bodies: [string, string, string][] = [
      ["/responses", `{"model":"${MODEL}","input":"hi","metadata":${deep}}`, "metadata"],
      ["/responses", `{"model":"${MODEL}","input":${deep}}`, "input"],
      ["/responses", `{"model":"${MODEL}","input":"hi","text":{"format":${deep}}}`, "text"],
      ["/responses/input_tokens", `{"model":"${MODEL}","input":${deep}}`, "input"],
      ["/chat/completions", `{"model":"${MODEL}","messages":${deep}}`, "messages"],
    ];
    for (const [path, raw, param] of bodies) {
      const r = await fetch(`${t.baseURL}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: raw,
      });
      assert.deepEqual(await errorOf(r), { status: 400, param, code: "nesting_too_deep" }, `${path} ${param}`);
    }
    assert.equal((await fetch(`${t.url}/health`).then((r) => r.json())).status, "ok");
  } finally {
    await t.close();
  }
});
