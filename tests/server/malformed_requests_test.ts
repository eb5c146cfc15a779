/**
 * Table-driven malformed and unsupported requests: each gets the right status and a complete error object
 * (message/type/param/code), and the server still answers /health afterwards.
 */
import assert from "node:assert/strict";
import { MODEL, startTestServer, tokenizer } from "../../testing/test_server.ts";

interface Case {
  readonly name: string;
  readonly method?: string;
  readonly path?: string;
  /** A raw body string, or a value to JSON-encode. */
  readonly body?: unknown;
  readonly raw?: string;
  readonly headers?: Record<string, string>;
  readonly status: number;
  readonly param?: string | null;
  readonly type?: string;
  readonly code?: string | null;
}

const R = "/v1/responses";
const C = "/v1/chat/completions";
const ok = { model: MODEL, input: "hi" };
const fn = { type: "function", name: "f", parameters: { type: "object", properties: {} } };
const chat = { model: MODEL, messages: [{ role: "user", content: "hi" }] };

const CASES: readonly Case[] = [
  // Transport-level
  { name: "unknown path", method: "GET", path: "/v1/nope", status: 404, code: "not_found" },
  { name: "unknown root path", method: "GET", path: "/", status: 404 },
  { name: "PUT on responses", method: "PUT", path: R, body: {}, status: 405, code: "method_not_allowed" },
  // GET is WebSocket mode: without the upgrade it says so.
  { name: "GET on responses without upgrade", method: "GET", path: R, status: 426, code: "upgrade_required" },
  { name: "PUT on a response id", method: "PUT", path: `${R}/resp_x`, body: {}, status: 405 },
  { name: "POST on models", method: "POST", path: "/v1/models", body: {}, status: 405 },
  { name: "DELETE on health", method: "DELETE", path: "/health", status: 405 },
  { name: "text/plain body", raw: "{}", headers: { "content-type": "text/plain" }, status: 415 },
  { name: "no content-type", raw: "{}", headers: {}, status: 415 },
  { name: "invalid JSON", raw: "{model:", status: 400, param: null, code: "invalid_json" },
  { name: "empty body", raw: "", status: 400, code: "invalid_json" },
  { name: "JSON array body", body: [1, 2], status: 400, param: null },
  { name: "JSON string body", body: "hello", status: 400 },
  { name: "body over the size limit", raw: JSON.stringify({ ...ok, input: "x".repeat(70_000) }), status: 413 },
  { name: "invalid UTF-8", raw: "\xff\xfe", status: 400, code: "invalid_json" },
  // Top-level fields
  { name: "missing model", body: { input: "hi" }, status: 400, param: "model" },
  { name: "model is a number", body: { model: 3, input: "hi" }, status: 400, param: "model" },
  {
    name: "unknown model",
    body: { model: "gpt-9", input: "hi" },
    status: 404,
    param: "model",
    code: "model_not_found",
  },
  { name: "missing input", body: { model: MODEL }, status: 400, param: "input", code: "missing_required_parameter" },
  { name: "input is a number", body: { model: MODEL, input: 42 }, status: 400, param: "input" },
  { name: "unknown top-level field", body: { ...ok, foo: 1 }, status: 400, param: "foo", code: "unknown_parameter" },
  { name: "temperature too high", body: { ...ok, temperature: 2.5 }, status: 400, param: "temperature" },
  { name: "temperature is a string", body: { ...ok, temperature: "hot" }, status: 400, param: "temperature" },
  { name: "top_p negative", body: { ...ok, top_p: -0.1 }, status: 400, param: "top_p" },
  { name: "top_p above 1", body: { ...ok, top_p: 1.1 }, status: 400, param: "top_p" },
  { name: "max_output_tokens zero", body: { ...ok, max_output_tokens: 0 }, status: 400, param: "max_output_tokens" },
  {
    name: "max_output_tokens fractional",
    body: { ...ok, max_output_tokens: 1.5 },
    status: 400,
    param: "max_output_tokens",
  },
  { name: "top_logprobs 21", body: { ...ok, top_logprobs: 21 }, status: 400, param: "top_logprobs" },
  { name: "metadata value not a string", body: { ...ok, metadata: { a: 1 } }, status: 400, param: "metadata.a" },
  {
    name: "metadata with 17 pairs",
    body: { ...ok, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) },
    status: 400,
    param: "metadata",
  },
  { name: "store not a boolean", body: { ...ok, store: "yes" }, status: 400, param: "store" },
  {
    name: "background without store",
    body: { ...ok, background: true, store: false },
    status: 400,
    param: "background",
  },
  { name: "stream_options without stream", body: { ...ok, stream_options: {} }, status: 400, param: "stream_options" },
  {
    name: "unknown stream_options key",
    body: { ...ok, stream: true, stream_options: { x: 1 } },
    status: 400,
    param: "stream_options.x",
  },
  { name: "truncation invalid", body: { ...ok, truncation: "middle" }, status: 400, param: "truncation" },
  { name: "include unknown value", body: { ...ok, include: ["nope"] }, status: 400, param: "include[0]" },
  {
    name: "include unsupported value",
    body: { ...ok, include: ["file_search_call.results"] },
    status: 400,
    param: "include[0]",
    code: "unsupported_parameter",
  },
  {
    name: "service tier flex",
    body: { ...ok, service_tier: "flex" },
    status: 400,
    param: "service_tier",
    code: "unsupported_parameter",
  },
  {
    name: "unknown conversation",
    body: { ...ok, conversation: "conv_1" },
    status: 404,
    param: "conversation",
    code: "not_found",
  },
  {
    name: "conversation with previous_response_id",
    body: { ...ok, conversation: { id: "conv_1" }, previous_response_id: "resp_1" },
    status: 400,
    param: "conversation",
  },
  { name: "conversation not a string or {id}", body: { ...ok, conversation: 7 }, status: 400, param: "conversation" },
  { name: "prompt template", body: { ...ok, prompt: { id: "pmpt_1" } }, status: 400, param: "prompt" },
  {
    name: "json_schema format",
    body: { ...ok, text: { format: { type: "json_schema", name: "x", schema: {} } } },
    status: 400,
    param: "text.format",
  },
  {
    name: "reasoning effort invalid",
    body: { ...ok, reasoning: { effort: "extreme" } },
    status: 400,
    param: "reasoning.effort",
  },
  {
    name: "prompt longer than the context",
    body: { ...ok, input: "x ".repeat(9000) },
    status: 400,
    param: "input",
    code: "context_length_exceeded",
  },
  {
    name: "prompt_cache_retention 24h",
    body: { ...ok, prompt_cache_retention: "24h" },
    status: 400,
    param: "prompt_cache_retention",
  },
  // Input items
  { name: "input item not an object", body: { ...ok, input: ["hi"] }, status: 400, param: "input[0]" },
  {
    name: "message with bad role",
    body: { ...ok, input: [{ role: "robot", content: "x" }] },
    status: 400,
    param: "input[0].role",
  },
  {
    name: "message without content",
    body: { ...ok, input: [{ role: "user" }] },
    status: 400,
    param: "input[0].content",
  },
  {
    name: "content part unknown type",
    body: { ...ok, input: [{ role: "user", content: [{ type: "video", url: "x" }] }] },
    status: 400,
    param: "input[0].content[0].type",
  },
  {
    name: "input_image is unsupported",
    body: { ...ok, input: [{ role: "user", content: [{ type: "input_image", image_url: "http://x" }] }] },
    status: 400,
    param: "input[0].content[0].type",
    code: "unsupported_parameter",
  },
  {
    name: "output_text in a user message",
    body: { ...ok, input: [{ role: "user", content: [{ type: "output_text", text: "x" }] }] },
    status: 400,
    param: "input[0].content[0].type",
  },
  {
    name: "input_text without text",
    body: { ...ok, input: [{ role: "user", content: [{ type: "input_text" }] }] },
    status: 400,
    param: "input[0].content[0].text",
  },
  { name: "unknown item type", body: { ...ok, input: [{ type: "telepathy" }] }, status: 400, param: "input[0].type" },
  {
    name: "item_reference to an id no stored response has",
    body: { ...ok, input: [{ type: "item_reference", id: "msg_1" }] },
    status: 404,
    param: "input[0].id",
    code: "not_found",
  },
  {
    name: "item_reference without an id",
    body: { ...ok, input: [{ type: "item_reference" }] },
    status: 400,
    param: "input[0].id",
  },
  {
    name: "function_call without call_id",
    body: { ...ok, input: [{ type: "function_call", name: "f", arguments: "{}" }] },
    status: 400,
    param: "input[0].call_id",
  },
  {
    name: "function_call_output without output",
    body: { ...ok, input: [{ type: "function_call_output", call_id: "c" }] },
    status: 400,
    param: "input[0].output",
  },
  {
    name: "reasoning without summary",
    body: { ...ok, input: [{ type: "reasoning", id: "rs_1" }] },
    status: 400,
    param: "input[0].summary",
  },
  // Tools
  { name: "tools not an array", body: { ...ok, tools: { type: "function" } }, status: 400, param: "tools" },
  { name: "tool without type", body: { ...ok, tools: [{ name: "f" }] }, status: 400, param: "tools[0].type" },
  { name: "unknown tool type", body: { ...ok, tools: [{ type: "teleport" }] }, status: 400, param: "tools[0].type" },
  {
    name: "function tool without name",
    body: { ...ok, tools: [{ type: "function" }] },
    status: 400,
    param: "tools[0].name",
  },
  {
    name: "function tool bad name",
    body: { ...ok, tools: [{ ...fn, name: "has space" }] },
    status: 400,
    param: "tools[0].name",
  },
  { name: "duplicate tool names", body: { ...ok, tools: [fn, fn] }, status: 400, param: "tools[1].name" },
  {
    name: "parameters not an object",
    body: { ...ok, tools: [{ ...fn, parameters: "x" }] },
    status: 400,
    param: "tools[0].parameters",
  },
  {
    name: "tool_choice unknown string",
    body: { ...ok, tools: [fn], tool_choice: "always" },
    status: 400,
    param: "tool_choice",
  },
  {
    name: "tool_choice names a missing tool",
    body: { ...ok, tools: [fn], tool_choice: { type: "function", name: "g" } },
    status: 400,
    param: "tool_choice.name",
  },
  {
    name: "tool_choice required without tools",
    body: { ...ok, tool_choice: "required" },
    status: 400,
    param: "tool_choice",
  },
  {
    name: "tool_choice hosted tool",
    body: { ...ok, tool_choice: { type: "web_search_preview" } },
    status: 400,
    param: "tool_choice",
  },
  {
    name: "parallel_tool_calls not boolean",
    body: { ...ok, parallel_tool_calls: "no" },
    status: 400,
    param: "parallel_tool_calls",
  },
  // Other Responses endpoints
  { name: "GET unknown response", method: "GET", path: `${R}/resp_missing`, status: 404 },
  { name: "DELETE unknown response", method: "DELETE", path: `${R}/resp_missing`, status: 404 },
  { name: "cancel unknown response", method: "POST", path: `${R}/resp_missing/cancel`, body: {}, status: 404 },
  { name: "input_items of unknown response", method: "GET", path: `${R}/resp_missing/input_items`, status: 404 },
  {
    name: "input_tokens unknown field",
    path: `${R}/input_tokens`,
    body: { ...ok, stream: true },
    status: 400,
    param: "stream",
  },
  {
    name: "input_tokens bad input",
    path: `${R}/input_tokens`,
    body: { model: MODEL, input: 5 },
    status: 400,
    param: "input",
  },
  // Chat Completions
  { name: "chat without messages", path: C, body: { model: MODEL }, status: 400, param: "messages" },
  { name: "chat empty messages", path: C, body: { model: MODEL, messages: [] }, status: 400, param: "messages" },
  {
    name: "chat bad role",
    path: C,
    body: { model: MODEL, messages: [{ role: "x", content: "y" }] },
    status: 400,
    param: "messages[0].role",
  },
  { name: "chat n=17", path: C, body: { ...chat, n: 17 }, status: 400, param: "n", code: "invalid_value" },
  {
    name: "chat tool message without id",
    path: C,
    body: { model: MODEL, messages: [{ role: "tool", content: "x" }] },
    status: 400,
    param: "messages[0].tool_call_id",
  },
  {
    name: "chat image content",
    path: C,
    body: { model: MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] },
    status: 400,
    param: "messages[0].content[0].type",
  },
  {
    name: "chat json_schema",
    path: C,
    body: { ...chat, response_format: { type: "json_schema" } },
    status: 400,
    param: "response_format.json_schema",
  },
  {
    name: "chat presence_penalty out of range",
    path: C,
    body: { ...chat, presence_penalty: 2.5 },
    status: 400,
    param: "presence_penalty",
  },
  { name: "chat top_k below -1", path: C, body: { ...chat, top_k: -2 }, status: 400, param: "top_k" },
  { name: "chat min_p above 1", path: C, body: { ...chat, min_p: 1.5 }, status: 400, param: "min_p" },
  {
    name: "chat repetition_penalty 0",
    path: C,
    body: { ...chat, repetition_penalty: 0 },
    status: 400,
    param: "repetition_penalty",
  },
  {
    name: "chat logit_bias over 100",
    path: C,
    body: { ...chat, logit_bias: { "1": 101 } },
    status: 400,
    param: "logit_bias.1",
  },
  {
    name: "chat logit_bias key not a token id",
    path: C,
    body: { ...chat, logit_bias: { "abc": 1 } },
    status: 400,
    param: "logit_bias.abc",
  },
  {
    name: "chat logit_bias id outside the vocabulary",
    path: C,
    body: { ...chat, logit_bias: { "999999999": 1 } },
    status: 400,
    param: "logit_bias",
  },
  {
    name: "chat top_logprobs without logprobs",
    path: C,
    body: { ...chat, top_logprobs: 2 },
    status: 400,
    param: "top_logprobs",
  },
  { name: "chat unknown field", path: C, body: { ...chat, bogus: true }, status: 400, param: "bogus" },
  { name: "chat unknown model", path: C, body: { ...chat, model: "x" }, status: 404, param: "model" },
  // Query parameters are never silently ignored either
  { name: "retrieve unknown query", method: "GET", path: `${R}/resp_x?bogus=1`, status: 400, param: "bogus" },
  {
    name: "retrieve include not honoured",
    method: "GET",
    path: `${R}/resp_x?include[]=file_search_call.results`,
    status: 400,
    param: "include[]",
    code: "unsupported_parameter",
  },
  {
    name: "retrieve include_obfuscation not a boolean",
    method: "GET",
    path: `${R}/resp_x?include_obfuscation=maybe`,
    status: 400,
    param: "include_obfuscation",
  },
  {
    name: "input_items unknown query",
    method: "GET",
    path: `${R}/resp_x/input_items?page=2`,
    status: 400,
    param: "page",
  },
  { name: "cancel with a query", path: `${R}/resp_x/cancel?force=1`, status: 400, param: "force" },
  { name: "delete with a query", method: "DELETE", path: `${R}/resp_x?hard=1`, status: 400, param: "hard" },
  {
    name: "reasoning.context all_turns",
    body: { ...ok, reasoning: { context: "all_turns" } },
    status: 400,
    param: "reasoning.context",
    code: "unsupported_parameter",
  },
  {
    name: "retrieve known query on an unknown id",
    method: "GET",
    path: `${R}/resp_x?include_obfuscation=false`,
    status: 404,
  },
];

Deno.test("malformed requests: status, error shape, and the server stays healthy", async (t) => {
  assert.ok(CASES.length >= 50, `only ${CASES.length} cases`);
  const server = startTestServer({ server: { maxBodyBytes: 64 * 1024 } });
  try {
    for (const c of CASES) {
      await t.step(c.name, async () => {
        const method = c.method ?? "POST";
        const headers = c.headers ?? { "content-type": "application/json" };
        const body = method === "GET" || method === "DELETE"
          ? undefined
          : c.raw !== undefined
          ? (c.raw === "\xff\xfe" ? new Uint8Array([0xff, 0xfe]) : c.raw)
          : JSON.stringify(c.body ?? {});
        const r = await fetch(`${server.url}${c.path ?? R}`, {
          method,
          headers,
          ...(body === undefined ? {} : { body }),
        });
        const text = await r.text();
        assert.equal(r.status, c.status, `${c.name}: ${text}`);
        assert.equal(r.headers.get("content-type"), "application/json");
        const parsed = JSON.parse(text);
        assert.deepEqual(Object.keys(parsed), ["error"]);
        const e = parsed.error;
        assert.deepEqual(Object.keys(e).sort(), ["code", "message", "param", "type"]);
        assert.equal(typeof e.message, "string");
        assert.ok(e.message.length > 0);
        assert.ok(e.code === null || typeof e.code === "string", "code must be a string or null");
        assert.ok(e.param === null || typeof e.param === "string");
        assert.equal(e.type, c.type ?? (c.status >= 500 ? "server_error" : "invalid_request_error"));
        if (c.param !== undefined) assert.equal(e.param, c.param, `${c.name}: ${e.message}`);
        if (c.code !== undefined) assert.equal(e.code, c.code);
        if (c.status === 405) assert.ok(r.headers.get("allow"));
        const health = await fetch(`${server.url}/health`);
        assert.equal(health.status, 200);
        await health.body?.cancel();
      });
    }
  } finally {
    await server.close();
  }
});

Deno.test("Codex-style payload is accepted: hosted tools, reasoning summary, store false, include, cache key", async () => {
  const server = startTestServer();
  try {
    const r = await fetch(`${server.baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({
        model: MODEL,
        instructions: null,
        input: [
          { type: "message", role: "developer", content: [{ type: "input_text", text: "You are Codex." }] },
          { type: "message", role: "developer", content: [{ type: "input_text", text: "<permissions/>" }] },
          { type: "message", role: "user", content: [{ type: "input_text", text: "<environment_context/>" }] },
          { type: "message", role: "user", content: [{ type: "input_text", text: "say hi" }] },
        ],
        tools: [
          {
            type: "function",
            name: "exec_command",
            description: "run",
            strict: false,
            parameters: { type: "object", properties: { cmd: { type: "string" } } },
          },
          { type: "web_search", external_web_access: false },
          {
            type: "custom",
            name: "apply_patch",
            description: "patch",
            format: { type: "grammar", syntax: "lark", definition: "start: x" },
          },
          { type: "local_shell" },
        ],
        tool_choice: "auto",
        parallel_tool_calls: false,
        reasoning: { effort: "medium", summary: "auto" },
        store: false,
        stream: true,
        include: ["reasoning.encrypted_content"],
        prompt_cache_key: "0199-abc",
        client_metadata: { session: "x" },
        text: { verbosity: "low" },
        service_tier: "auto",
      }),
    });
    assert.equal(r.status, 200, await r.clone().text());
    const text = await r.text();
    assert.match(text, /response\.completed/);
    // Only the function tool reaches the prompt; hosted tools are echoed, not offered.
    const prompt = tokenizer().decode(server.engine.requests[0]!.promptTokens);
    assert.ok(prompt.includes("exec_command"));
    assert.ok(!prompt.includes("apply_patch") && !prompt.includes("local_shell"), prompt);
    const created = JSON.parse(text.split("\n")[1]!.slice("data: ".length));
    assert.equal(created.response.tools.length, 4);
  } finally {
    await server.close();
  }
});
