/**
 * Every Response rill returns — POST (streamed and not), GET, background, cancelled, and the `response` of every
 * lifecycle event — checked against the required fields and types of the published Responses specifications
 * (tests/fixtures/openapi/response_schema.json, taken from the Open Responses and OpenAI OpenAPI documents), not
 * against rill's own types.
 */
import assert from "node:assert/strict";
import { eventSchemaErrors, isLifecycleEvent, responseSchemaErrors } from "./openapi_response_check.ts";
import { fullResponseErrors, streamEventErrors } from "./openapi_shape_check.ts";
import type { Engine, EngineChunk } from "../../engine/engine.ts";
import { MODEL, postJson, startTestServer, type TestServer, tokenizer } from "../../testing/test_server.ts";

const WEATHER = { type: "function", name: "get_weather", parameters: { type: "object", properties: {} } };

function assertConforms(response: unknown, where: string): void {
  assert.deepEqual(responseSchemaErrors(response, where), []);
  assert.deepEqual(fullResponseErrors(response, where), []);
}

/** The SSE body's events, each lifecycle event checked; returns the events. */
async function streamedEvents(r: Response): Promise<Record<string, unknown>[]> {
  const text = await r.text();
  const events = text.split("\n\n").flatMap((frame) => {
    const data = frame.split("\n").find((l) => l.startsWith("data: "));
    return data === undefined ? [] : [JSON.parse(data.slice(6)) as Record<string, unknown>];
  });
  for (const e of events) {
    assert.deepEqual(eventSchemaErrors(e), [], String(e["type"]));
    assert.deepEqual(streamEventErrors(e), [], String(e["type"]));
  }
  return events;
}

async function poll(t: TestServer, id: string, done: (r: Record<string, unknown>) => boolean) {
  for (let i = 0; i < 200; i++) {
    const r = await (await fetch(`${t.baseURL}/responses/${id}`)).json();
    if (done(r)) return r;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`response ${id} never finished`);
}

Deno.test("the checker itself rejects what the specs forbid", () => {
  assert.ok(responseSchemaErrors({}).length > 10);
  const ok = {
    id: "resp_1",
    object: "response",
    created_at: 1,
    completed_at: null,
    status: "completed",
    incomplete_details: null,
    model: "m",
    previous_response_id: null,
    instructions: null,
    output: [],
    error: null,
    tools: [],
    tool_choice: "auto",
    truncation: "disabled",
    parallel_tool_calls: true,
    text: { format: { type: "text" } },
    top_p: 1,
    presence_penalty: 0,
    frequency_penalty: 0,
    top_logprobs: 0,
    temperature: 1,
    reasoning: null,
    user: null,
    usage: null,
    max_output_tokens: null,
    max_tool_calls: null,
    store: true,
    background: false,
    service_tier: "default",
    metadata: {},
    safety_identifier: null,
    prompt_cache_key: null,
  };
  assert.deepEqual(responseSchemaErrors(ok), []);
  assert.deepEqual(responseSchemaErrors({ ...ok, top_logprobs: null }), [
    "response.top_logprobs: null is not integer",
  ]);
  const { presence_penalty: _, ...noPenalty } = ok;
  assert.deepEqual(responseSchemaErrors(noPenalty), ["response.presence_penalty: missing"]);
  assert.deepEqual(responseSchemaErrors({ ...ok, tools: [{ type: "function", name: "f", parameters: {} }] }), [
    "response.tools[0].strict: missing",
  ]);
});

Deno.test("POST, GET and streamed responses carry every field of the Response schema, echoing the request", async () => {
  const t = startTestServer();
  try {
    const plain = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" })).json();
    assertConforms(plain, "POST");
    assert.equal(plain.top_logprobs, 0);
    assert.equal(plain.presence_penalty, 0);
    assert.equal(plain.frequency_penalty, 0);
    assert.equal(plain.max_tool_calls, null);
    assertConforms(await (await fetch(`${t.baseURL}/responses/${plain.id}`)).json(), "GET");

    const echoed = {
      model: MODEL,
      input: "weather?",
      tools: [WEATHER, { type: "web_search" }],
      include: ["message.output_text.logprobs"],
      top_logprobs: 2,
      max_tool_calls: 3,
      safety_identifier: "user-1234",
      prompt_cache_key: "thread-9",
      metadata: { k: "v" },
    };
    const called = await (await postJson(`${t.baseURL}/responses`, echoed)).json();
    assertConforms(called, "POST with tools");
    assert.equal(called.output.at(-1).type, "function_call");
    assert.equal(called.top_logprobs, 2);
    assert.equal(called.max_tool_calls, 3);
    assert.equal(called.safety_identifier, "user-1234");
    assert.equal(called.prompt_cache_key, "thread-9");
    // Function tools normalised to the spec's full shape; other tools as sent.
    assert.deepEqual(called.tools, [
      { type: "function", name: "get_weather", description: null, parameters: WEATHER.parameters, strict: false },
      { type: "web_search" },
    ]);

    const events = await streamedEvents(await postJson(`${t.baseURL}/responses`, { ...echoed, stream: true }));
    const lifecycle = events.filter((e) => isLifecycleEvent(String(e["type"])));
    assert.deepEqual(lifecycle.map((e) => e["type"]), [
      "response.created",
      "response.in_progress",
      "response.completed",
    ]);
    for (const e of lifecycle) {
      const r = e["response"] as Record<string, unknown>;
      assert.equal(r["prompt_cache_key"], "thread-9");
      assert.equal(r["top_logprobs"], 2);
    }
  } finally {
    await t.close();
  }
});

Deno.test("background and cancelled responses carry every field of the Response schema", async () => {
  const t = startTestServer({ stepDelayMs: 5 });
  try {
    const queued = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", background: true }))
      .json();
    assertConforms(queued, "background POST");
    assert.equal(queued.status, "queued");
    assertConforms(await poll(t, queued.id, (r) => r["status"] === "completed"), "background GET");

    const slow = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", background: true }))
      .json();
    const cancelled = await (await postJson(`${t.baseURL}/responses/${slow.id}/cancel`, {})).json();
    assertConforms(cancelled, "cancel");
    assertConforms(await poll(t, slow.id, (r) => r["status"] !== "queued" && r["status"] !== "in_progress"), "GET");

    const streamed = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      background: true,
      stream: true,
    });
    const events = await streamedEvents(streamed);
    assert.ok(events.some((e) => e["type"] === "response.queued"));
  } finally {
    await t.close();
  }
});

Deno.test("incomplete and failed responses carry every field of the Response schema", async () => {
  const t = startTestServer();
  try {
    const cut = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", max_output_tokens: 2 }))
      .json();
    assert.equal(cut.status, "incomplete");
    assertConforms(cut, "incomplete");
    await streamedEvents(
      await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", max_output_tokens: 2, stream: true }),
    );
  } finally {
    await t.close();
  }
  const failing: Engine = {
    modelId: MODEL,
    tokenizer: tokenizer(),
    maxModelLen: 8192,
    generate: (request) =>
      new ReadableStream<EngineChunk>({
        start(controller) {
          controller.enqueue({ type: "step", tokens: tokenizer().encode("<|channel|>final<|message|>Hi") });
          controller.enqueue({
            type: "finish",
            reason: "error",
            promptTokens: request.promptTokens.length,
            outputTokens: 1,
            message: "boom",
          });
          controller.close();
        },
      }),
    stats: () => ({ running: 0, waiting: 0, kvCacheUsage: 0 }),
    close: () => Promise.resolve(),
  };
  const f = startTestServer({ server: { engine: failing } });
  try {
    const events = await streamedEvents(
      await postJson(`${f.baseURL}/responses`, { model: MODEL, input: "hi", stream: true }),
    );
    const last = events.at(-1)!;
    assert.equal(last["type"], "response.failed");
    const stored = await (await fetch(`${f.baseURL}/responses/${(last["response"] as { id: string }).id}`)).json();
    assert.equal(stored.status, "failed");
    assertConforms(stored, "GET failed");
  } finally {
    await f.close();
  }
});
