/**
 * Every object and event rill returns, checked shape by shape against the OpenAI OpenAPI document
 * (tests/fixtures/openapi/shape_schema.json through openapi_shape_check.ts), not against rill's own types: Responses
 * with reasoning (`encrypted_content`), messages with logprobs and function calls, streamed over SSE and over the
 * WebSocket mode; a compaction; Chat Completions with n = 2 streamed and not; legacy Completions streamed and not.
 */
import assert from "node:assert/strict";
import {
  chatChunkErrors,
  chatCompletionErrors,
  compactionResponseErrors,
  completionChunkErrors,
  completionErrors,
  fullResponseErrors,
  outputItemErrors,
  socketEventErrors,
  streamEventErrors,
} from "./openapi_shape_check.ts";
import { SUMMARY_REQUEST } from "../../api/responses/response_compaction.ts";
import type { GenerateRequest } from "../../engine/engine.ts";
import {
  answerText,
  defaultScript,
  MODEL,
  postJson,
  startTestServer,
  type TestServer,
  tokenizer,
} from "../../testing/test_server.ts";

type Json = Record<string, unknown>;

const WEATHER = {
  type: "function",
  name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" } } },
};
const REASONED = {
  model: MODEL,
  include: ["reasoning.encrypted_content", "message.output_text.logprobs"],
  top_logprobs: 2,
  store: false,
};

/** The JSON `data:` payloads of an SSE body, `[DONE]` left out. */
async function sseData(r: Response): Promise<Json[]> {
  assert.equal(r.status, 200);
  const text = await r.text();
  return text.split("\n\n").flatMap((frame) => {
    const data = frame.split("\n").find((l) => l.startsWith("data: "))?.slice(6);
    return data === undefined || data === "[DONE]" ? [] : [JSON.parse(data) as Json];
  });
}

function assertEvents(events: readonly Json[], where: string): void {
  assert.ok(events.length > 0, where);
  for (const e of events) assert.deepEqual(streamEventErrors(e), [], `${where}: ${JSON.stringify(e).slice(0, 300)}`);
}

function types(output: unknown): string[] {
  return (output as Json[]).map((item) => String(item["type"]));
}

const OUTPUT_TEXT = {
  type: "output_text",
  text: "Hi",
  annotations: [],
  logprobs: [{
    token: "Hi",
    logprob: -0.1,
    bytes: [72, 105],
    top_logprobs: [{ token: "Hi", logprob: -0.1, bytes: [] }],
  }],
};
const MESSAGE = { type: "message", id: "msg_1", role: "assistant", status: "completed", content: [OUTPUT_TEXT] };

Deno.test("the shape checker rejects what the spec forbids: messages and output_text parts", () => {
  assert.deepEqual(outputItemErrors(MESSAGE, "m"), []);
  const { annotations: _, ...noAnnotations } = OUTPUT_TEXT;
  assert.deepEqual(outputItemErrors({ ...MESSAGE, content: [noAnnotations] }, "m"), [
    "m.content[0].annotations: missing",
  ]);
  assert.deepEqual(outputItemErrors({ ...MESSAGE, content: [{ ...OUTPUT_TEXT, logprobs: null }] }, "m"), [
    "m.content[0].logprobs: null is not array",
  ]);
  assert.deepEqual(
    outputItemErrors(
      { ...MESSAGE, content: [{ ...OUTPUT_TEXT, logprobs: [{ token: "Hi", logprob: -1, bytes: [] }] }] },
      "m",
    ),
    ["m.content[0].logprobs[0].top_logprobs: missing"],
  );
  assert.deepEqual(outputItemErrors({ ...MESSAGE, content: [{ type: "output_audio" }] }, "m"), [
    'm.content[0].type: no schema for content part "output_audio"',
  ]);
  assert.deepEqual(outputItemErrors({ type: "mystery" }, "x"), ['x.type: no schema for output item "mystery"']);
});

Deno.test("the shape checker rejects what the spec forbids: function calls, reasoning and compaction items", () => {
  const call = {
    type: "function_call",
    id: "fc_1",
    call_id: "call_1",
    name: "f",
    arguments: "{}",
    status: "completed",
  };
  assert.deepEqual(outputItemErrors(call, "c"), []);
  assert.deepEqual(outputItemErrors({ ...call, arguments: {} }, "c"), ["c.arguments: {} is not string"]);
  const { call_id: _, ...noCallId } = call;
  assert.deepEqual(outputItemErrors(noCallId, "c"), ["c.call_id: missing"]);

  const reasoning = { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "t" }] };
  assert.deepEqual(outputItemErrors({ ...reasoning, encrypted_content: "abc" }, "r"), []);
  assert.deepEqual(outputItemErrors({ ...reasoning, encrypted_content: 5 }, "r"), [
    "r.encrypted_content: 5 is not null | string",
  ]);
  assert.deepEqual(outputItemErrors({ ...reasoning, summary: null }, "r"), ["r.summary: null is not array"]);
  assert.deepEqual(outputItemErrors({ ...reasoning, content: [{ type: "reasoning_text" }] }, "r"), [
    "r.content[0].text: missing",
  ]);

  assert.deepEqual(outputItemErrors({ type: "compaction", id: "cmp_1", encrypted_content: "x" }, "k"), []);
  assert.deepEqual(outputItemErrors({ type: "compaction", id: "cmp_1", encrypted_content: null }, "k"), [
    "k.encrypted_content: null is not string",
  ]);
});

Deno.test("the shape checker rejects what the spec forbids: streamed events and the compaction response", () => {
  const delta = {
    type: "response.output_text.delta",
    sequence_number: 3,
    item_id: "msg_1",
    output_index: 0,
    content_index: 0,
    delta: "Hi",
    logprobs: [],
  };
  assert.deepEqual(streamEventErrors(delta), []);
  const { logprobs: _, ...noLogprobs } = delta;
  assert.deepEqual(streamEventErrors(noLogprobs), ["response.output_text.delta.logprobs: missing"]);
  assert.deepEqual(streamEventErrors({ ...delta, sequence_number: "3" }), [
    'response.output_text.delta.sequence_number: "3" is not integer',
  ]);
  assert.deepEqual(
    streamEventErrors({
      type: "response.output_item.added",
      sequence_number: 1,
      output_index: 0,
      item: { ...MESSAGE, id: 1 },
    }),
    [
      "response.output_item.added.item.id: 1 is not string",
    ],
  );
  assert.deepEqual(
    streamEventErrors({
      type: "response.content_part.added",
      sequence_number: 1,
      output_index: 0,
      content_index: 0,
      item_id: "m",
      part: { type: "output_text", text: "" },
    }),
    ["response.content_part.added.part.annotations: missing", "response.content_part.added.part.logprobs: missing"],
  );
  assert.deepEqual(streamEventErrors({ type: "response.made_up", sequence_number: 1 }), [
    "response.made_up: no schema for this event type",
  ]);
  assert.ok(streamEventErrors({ type: "response.completed", sequence_number: 9, response: {} }).length > 10);
  const wsError = {
    type: "error",
    status: 400,
    error: { type: "invalid_request_error", code: null, message: "m", param: null },
  };
  assert.deepEqual(socketEventErrors(wsError), []);
  assert.deepEqual(
    socketEventErrors({ ...wsError, error: { type: "invalid_request_error", message: "m", param: null } }),
    [
      "error.error.code: missing",
    ],
  );
  assert.deepEqual(socketEventErrors({ ...wsError, status: "400" }), ['error.status: "400" is not integer']);

  const usage = {
    input_tokens: 1,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 1,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 2,
  };
  const compacted = {
    id: "resp_1",
    object: "response.compaction",
    created_at: 1,
    output: [{ type: "compaction", id: "cmp_1", encrypted_content: "x" }],
    usage,
  };
  assert.deepEqual(compactionResponseErrors(compacted), []);
  assert.deepEqual(compactionResponseErrors({ ...compacted, usage: { ...usage, total_tokens: null } }), [
    "compaction.usage.total_tokens: null is not integer",
  ]);
  assert.deepEqual(compactionResponseErrors({ ...compacted, output: [{ type: "compaction", id: "cmp_1" }] }), [
    "compaction.output[0].encrypted_content: missing",
  ]);
});

Deno.test("the shape checker rejects what the spec forbids: chat completions, chunks and legacy completions", () => {
  const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
  const chat = {
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1,
    model: "m",
    choices: [{
      index: 0,
      finish_reason: "stop",
      logprobs: null,
      message: { role: "assistant", content: "Hi", refusal: null },
    }],
    usage,
  };
  assert.deepEqual(chatCompletionErrors(chat), []);
  assert.deepEqual(
    chatCompletionErrors({ ...chat, choices: [{ ...chat.choices[0], message: { role: "assistant", content: "Hi" } }] }),
    [
      "chat.completion.choices[0].message.refusal: missing",
    ],
  );
  assert.deepEqual(chatCompletionErrors({ ...chat, choices: [{ ...chat.choices[0], finish_reason: null }] }), [
    "chat.completion.choices[0].finish_reason: null is not string",
  ]);
  assert.deepEqual(
    chatCompletionErrors({
      ...chat,
      choices: [{ ...chat.choices[0], logprobs: { content: [{ token: "Hi", logprob: 0, bytes: null }] } }],
    }),
    ["chat.completion.choices[0].logprobs.content[0].top_logprobs: missing"],
  );

  const chunk = {
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "m",
    choices: [{ index: 1, delta: { content: "H" }, finish_reason: null }],
  };
  assert.deepEqual(chatChunkErrors(chunk), []);
  assert.deepEqual(chatChunkErrors({ ...chunk, usage: null }), []);
  assert.deepEqual(chatChunkErrors({ ...chunk, choices: [{ index: 1, delta: { content: "H" } }] }), [
    "chat.completion.chunk.choices[0].finish_reason: missing",
  ]);
  assert.deepEqual(
    chatChunkErrors({ ...chunk, choices: [{ index: 1, finish_reason: null, delta: { tool_calls: [{ id: "c" }] } }] }),
    [
      "chat.completion.chunk.choices[0].delta.tool_calls[0].index: missing",
    ],
  );

  const completion = {
    id: "cmpl-1",
    object: "text_completion",
    created: 1,
    model: "m",
    choices: [{ index: 0, text: "Hi", logprobs: null, finish_reason: "stop" }],
    usage,
  };
  assert.deepEqual(completionErrors(completion), []);
  assert.deepEqual(completionErrors({ ...completion, choices: [{ index: 0, text: "Hi", finish_reason: "stop" }] }), [
    "text_completion.choices[0].logprobs: missing",
  ]);
  assert.deepEqual(completionErrors({ ...completion, created: 1.5 }), ["text_completion.created: 1.5 is not integer"]);
  const streamed = {
    ...completion,
    usage: null,
    choices: [{ index: 0, text: "H", logprobs: null, finish_reason: null }],
  };
  assert.deepEqual(completionChunkErrors(streamed), []);
  assert.deepEqual(completionChunkErrors({ ...streamed, usage: 3 }), ["text_completion.usage: 3 is not object"]);
  assert.deepEqual(
    completionChunkErrors({ ...streamed, choices: [{ index: 0, logprobs: null, finish_reason: null }] }),
    [
      "text_completion.choices[0].text: missing",
    ],
  );
});

Deno.test("responses with reasoning, encrypted_content, logprobs and a function call conform, streamed and not", async () => {
  const t = startTestServer();
  try {
    const called =
      await (await postJson(`${t.baseURL}/responses`, { ...REASONED, input: "weather?", tools: [WEATHER] })).json();
    assert.deepEqual(fullResponseErrors(called), []);
    assert.deepEqual(types(called.output), ["reasoning", "function_call"]);
    assert.equal(typeof called.output[0].encrypted_content, "string");
    const answered = await (await postJson(`${t.baseURL}/responses`, { ...REASONED, input: "hi" })).json();
    assert.deepEqual(fullResponseErrors(answered), []);
    assert.deepEqual(types(answered.output), ["reasoning", "message"]);
    assert.ok(answered.output[1].content[0].logprobs.length > 0);

    for (const body of [{ ...REASONED, input: "weather?", tools: [WEATHER] }, { ...REASONED, input: "hi" }]) {
      const events = await sseData(await postJson(`${t.baseURL}/responses`, { ...body, stream: true }));
      assertEvents(events, "SSE");
      const kinds = new Set(events.map((e) => e["type"]));
      for (const k of ["response.output_item.added", "response.output_item.done", "response.reasoning_text.delta"]) {
        assert.ok(kinds.has(k), k);
      }
      assert.ok(
        kinds.has(!("tools" in body) ? "response.output_text.delta" : "response.function_call_arguments.done"),
      );
    }
  } finally {
    await t.close();
  }
});

Deno.test("the same responses conform event by event over the WebSocket mode", async () => {
  const t = startTestServer();
  const ws = new WebSocket(`${t.url.replace(/^http/, "ws")}/v1/responses`);
  const messages: Json[] = [];
  let wake: (() => void) | null = null;
  ws.addEventListener("message", (e) => {
    messages.push(JSON.parse(e.data as string));
    wake?.();
  });
  const closed = new Promise((resolve) => ws.addEventListener("close", resolve));
  try {
    await new Promise((resolve, reject) => {
      ws.addEventListener("open", resolve);
      ws.addEventListener("error", reject);
    });
    for (const body of [{ ...REASONED, input: "weather?", tools: [WEATHER] }, { ...REASONED, input: "hi" }]) {
      messages.length = 0;
      ws.send(JSON.stringify({ type: "response.create", ...body }));
      while (!messages.some((m) => m["type"] === "response.completed" || m["type"] === "error")) {
        await new Promise<void>((resolve) => wake = resolve);
      }
      for (const m of messages) assert.deepEqual(socketEventErrors(m), [], JSON.stringify(m).slice(0, 300));
      assert.equal(messages.at(-1)!["type"], "response.completed");
    }
    // A message refused before its response starts is answered with the spec's WebSocket error event.
    messages.length = 0;
    ws.send(JSON.stringify({ type: "response.create", ...REASONED, input: "hi", previous_response_id: "resp_nope" }));
    while (messages.length === 0) await new Promise<void>((resolve) => wake = resolve);
    assert.equal(messages[0]!["type"], "error");
    assert.deepEqual(socketEventErrors(messages[0]), []);
  } finally {
    ws.close();
    await closed;
    await t.close();
  }
});

Deno.test("a compaction conforms to the compaction response and its items", async () => {
  const tok = tokenizer();
  const fallback = defaultScript(tok);
  const script = (request: GenerateRequest) =>
    tok.decode(request.promptTokens).includes(SUMMARY_REQUEST)
      ? tok.encode(answerText("Asked about Paris."))
      : fallback(request);
  const t = startTestServer({ script });
  try {
    const input = [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "It is sunny in Paris." },
      { role: "user", content: "And Rome?" },
    ];
    const compacted = await (await postJson(`${t.baseURL}/responses/compact`, { model: MODEL, input })).json();
    assert.deepEqual(compactionResponseErrors(compacted), []);
    assert.equal(types(compacted.output).at(-1), "compaction");
  } finally {
    await t.close();
  }
});

/** The chat/completion requests below, each streamed and not. */
async function both(t: TestServer, path: string, body: Json): Promise<{ whole: Json; chunks: Json[] }> {
  const whole = await (await postJson(`${t.baseURL}/${path}`, body)).json();
  const chunks = await sseData(
    await postJson(`${t.baseURL}/${path}`, { ...body, stream: true, stream_options: { include_usage: true } }),
  );
  return { whole, chunks };
}

Deno.test("chat completions with n = 2 (logprobs and tool calls) conform, streamed and not", async () => {
  const t = startTestServer();
  try {
    for (const extra of [{}, { tools: [{ type: "function", function: WEATHER }] }]) {
      const body = {
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        n: 2,
        logprobs: true,
        top_logprobs: 2,
        ...extra,
      };
      const { whole, chunks } = await both(t, "chat/completions", body);
      assert.deepEqual(chatCompletionErrors(whole), []);
      assert.deepEqual((whole["choices"] as Json[]).map((c) => c["index"]), [0, 1]);
      assert.ok(chunks.length > 2);
      for (const c of chunks) assert.deepEqual(chatChunkErrors(c), [], JSON.stringify(c));
      assert.deepEqual([...new Set(chunks.flatMap((c) => (c["choices"] as Json[]).map((x) => x["index"])))].sort(), [
        0,
        1,
      ]);
    }
  } finally {
    await t.close();
  }
});

Deno.test("legacy completions (a prompt list, n = 2) conform, streamed and not", async () => {
  const t = startTestServer({ script: tokenizer().encode("Hello there.") });
  try {
    const { whole, chunks } = await both(t, "completions", { model: MODEL, prompt: ["a", "b"], n: 2, max_tokens: 8 });
    assert.deepEqual(completionErrors(whole), []);
    assert.equal((whole["choices"] as Json[]).length, 4);
    assert.ok(chunks.length > 4);
    for (const c of chunks) assert.deepEqual(completionChunkErrors(c), [], JSON.stringify(c));
  } finally {
    await t.close();
  }
});
