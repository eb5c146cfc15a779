/**
 * The official `openai` npm client against a real rill server over loopback. Every stream the client reads is also
 * captured on the wire (a fetch wrapper tees the body) and checked by the stream validator.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { validateSSE } from "../../conformance/validator.ts";
import { sseTap } from "../../testing/sse_tap.ts";
import { ANSWER, MODEL, REASONING, startTestServer, type TestServer } from "../../testing/test_server.ts";

const WEATHER = {
  type: "function" as const,
  name: "get_weather",
  description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: false,
};

/** A client whose fetch keeps a copy of every SSE body, for the validator. */
function client(t: TestServer): { openai: OpenAI; sse: Promise<string>[] } {
  const tap = sseTap();
  return {
    openai: new OpenAI({ baseURL: t.baseURL, apiKey: "unused", fetch: tap.fetch, maxRetries: 0 }),
    sse: tap.bodies,
  };
}

async function assertValidStreams(sse: Promise<string>[], options: { background?: boolean } = {}): Promise<void> {
  assert.ok(sse.length > 0, "no stream was captured");
  for (const body of await Promise.all(sse)) {
    const { violations } = validateSSE(body, options);
    assert.deepEqual(violations, [], body.slice(0, 1500));
  }
}

Deno.test("openai: responses.create non-streamed, retrieve, input_items, delete", async () => {
  const t = startTestServer();
  try {
    const { openai } = client(t);
    const response = await openai.responses.create({ model: MODEL, input: "hi", metadata: { k: "v" } });
    assert.equal(response.status, "completed");
    assert.equal(response.output_text, ANSWER);
    assert.deepEqual(response.metadata, { k: "v" });
    const retrieved = await openai.responses.retrieve(response.id);
    assert.equal(retrieved.output_text, ANSWER);
    assert.deepEqual(retrieved.output, response.output);
    const items = await openai.responses.inputItems.list(response.id);
    assert.equal(items.data.length, 1);
    assert.equal(items.data[0]!.type, "message");
    await openai.responses.delete(response.id);
    await assert.rejects(openai.responses.retrieve(response.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
  } finally {
    await t.close();
  }
});

Deno.test("openai: responses.create streamed yields every event of a valid stream", async () => {
  const t = startTestServer({ chunking: "one" });
  try {
    const { openai, sse } = client(t);
    const stream = await openai.responses.create({ model: MODEL, input: "hi", stream: true });
    const types: string[] = [];
    let text = "";
    let reasoning = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.reasoning_text.delta") reasoning += event.delta;
    }
    assert.equal(types[0], "response.created");
    assert.equal(types.at(-1), "response.completed");
    assert.equal(text, ANSWER);
    assert.equal(reasoning, REASONING);
    await assertValidStreams(sse);
  } finally {
    await t.close();
  }
});

Deno.test("openai: responses.stream() helper finalResponse() under several chunkings, tools included", async () => {
  for (const chunking of ["one", "all", { seed: 3, max: 5 }] as const) {
    const t = startTestServer({ chunking });
    try {
      const { openai, sse } = client(t);
      const runner = openai.responses.stream({ model: MODEL, input: "hi" });
      let deltas = "";
      runner.on("response.output_text.delta", (e) => deltas += e.delta);
      const final = await runner.finalResponse();
      assert.equal(final.output_text, ANSWER);
      assert.equal(deltas, ANSWER);

      const call = await openai.responses.stream({ model: MODEL, input: "weather?", tools: [WEATHER] }).finalResponse();
      const fc = call.output.find((i) => i.type === "function_call");
      assert.ok(fc !== undefined && fc.type === "function_call");
      assert.equal(fc.name, "get_weather");
      assert.deepEqual(JSON.parse(fc.arguments), { city: "Paris" });
      await assertValidStreams(sse);
    } finally {
      await t.close();
    }
  }
});

Deno.test("openai: background create, retrieve stream resume, cancel", async () => {
  const t = startTestServer({ stepDelayMs: 25, chunking: "one" });
  try {
    const { openai, sse } = client(t);
    const done = await openai.responses.create({ model: MODEL, input: "hi", background: true });
    assert.ok(done.status === "queued" || done.status === "in_progress");
    const resumed = await openai.responses.retrieve(done.id, { stream: true, starting_after: 2 });
    const seqs: number[] = [];
    for await (const event of resumed) seqs.push(event.sequence_number);
    assert.equal(seqs[0], 3);
    assert.deepEqual(seqs, seqs.map((_, i) => i + 3));
    assert.equal((await openai.responses.retrieve(done.id)).status, "completed");
    const full = await openai.responses.retrieve(done.id, { stream: true });
    for await (const _ of full) { /* drain: the captured body is validated below */ }
    await assertValidStreams(sse.slice(-1), { background: true });

    const running = await openai.responses.create({ model: MODEL, input: "hi", background: true });
    const cancelled = await openai.responses.cancel(running.id);
    assert.equal(cancelled.status, "cancelled");
    assert.equal((await openai.responses.cancel(running.id)).status, "cancelled");
    assert.equal((await openai.responses.retrieve(running.id)).status, "cancelled");
  } finally {
    await t.close();
  }
});

Deno.test("openai: chat completions streamed and not", async () => {
  const t = startTestServer();
  try {
    const { openai } = client(t);
    const completion = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(completion.choices[0]!.message.content, ANSWER);
    assert.equal(completion.choices[0]!.finish_reason, "stop");
    const stream = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, ANSWER);
    assert.ok(usage !== undefined && usage !== null && usage.completion_tokens > 0);
    const tools = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "weather?" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: WEATHER.parameters } }],
    });
    const call = tools.choices[0]!.message.tool_calls?.[0];
    assert.ok(call !== undefined && call.type === "function");
    assert.equal(call.function.name, "get_weather");
  } finally {
    await t.close();
  }
});

Deno.test("openai: errors surface as typed APIErrors with param", async () => {
  const t = startTestServer();
  try {
    const { openai } = client(t);
    await assert.rejects(
      openai.responses.create({ model: MODEL, input: "hi", temperature: 9 }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === "temperature",
    );
  } finally {
    await t.close();
  }
});
