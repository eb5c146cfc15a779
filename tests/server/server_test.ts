import assert from "node:assert/strict";
import { validateSSE } from "../../conformance/validator.ts";
import { ANSWER, MODEL, postJson, REASONING, startTestServer, tokenizer } from "../../testing/test_server.ts";

const WEATHER_TOOL = {
  type: "function",
  name: "get_weather",
  description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

function sseCheck(body: string, options: { background?: boolean } = {}): Record<string, unknown>[] {
  const { events, violations } = validateSSE(body, options);
  assert.deepEqual(violations, [], body.slice(0, 2000));
  return events as Record<string, unknown>[];
}

function terminal(events: Record<string, unknown>[]): Record<string, unknown> {
  const last = events.at(-1)!;
  return last.response as Record<string, unknown>;
}

Deno.test("streamed response: SSE headers, valid stream, reasoning and answer, stored and retrievable", async () => {
  const t = startTestServer();
  try {
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "text/event-stream");
    assert.match(r.headers.get("cache-control") ?? "", /no-cache/);
    const events = sseCheck(await r.text());
    const final = terminal(events);
    assert.equal(final.status, "completed");
    const output = final.output as Record<string, unknown>[];
    assert.deepEqual(output.map((i) => i.type), ["reasoning", "message"]);
    assert.deepEqual((output[0]!.content as { text: string }[])[0]!.text, REASONING);
    assert.equal((output[1]!.content as { text: string }[])[0]!.text, ANSWER);

    const got = await fetch(`${t.baseURL}/responses/${final.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(await got.json(), final);
  } finally {
    await t.close();
  }
});

Deno.test("SSE is neither compressed nor buffered when the client accepts gzip", async () => {
  const t = startTestServer({ stepDelayMs: 150, chunking: "one" });
  try {
    const started = performance.now();
    const r = await fetch(`${t.baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", "accept-encoding": "gzip, br" },
      body: JSON.stringify({ model: MODEL, input: "hi", stream: true }),
    });
    assert.notEqual(r.headers.get("content-encoding"), "gzip");
    assert.notEqual(r.headers.get("content-encoding"), "br");
    const reader = r.body!.getReader();
    const first = await reader.read();
    const firstAt = performance.now() - started;
    const text = new TextDecoder().decode(first.value);
    assert.match(text, /^event: response\.created/);
    // The whole generation takes ≥ 20 steps × 150 ms; the first event must arrive long before that.
    assert.ok(firstAt < 1500, `first SSE bytes after ${firstAt} ms`);
    await reader.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("non-streamed response equals the terminal response of the same request streamed", async () => {
  const t = startTestServer();
  try {
    const plain = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" })).json();
    const events = sseCheck(
      await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true })).text(),
    );
    const streamed = terminal(events);
    const strip = (r: Record<string, unknown>) =>
      JSON.stringify(r, (k, v) => (k === "id" || k === "created_at" || k === "completed_at" ? undefined : v));
    assert.equal(strip(plain), strip(streamed));
  } finally {
    await t.close();
  }
});

Deno.test("a client that disconnects aborts its generation within a step", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one" });
  try {
    const controller = new AbortController();
    const r = await fetch(`${t.baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input: "hi", stream: true }),
      signal: controller.signal,
    });
    const reader = r.body!.getReader();
    await reader.read();
    await reader.read();
    controller.abort();
    await reader.closed.catch(() => {});
    const request = t.engine.requests[0]!;
    for (let i = 0; i < 50 && !request.signal!.aborted; i++) await new Promise((res) => setTimeout(res, 10));
    assert.ok(request.signal!.aborted, "generation signal was not aborted");
    for (let i = 0; i < 50 && t.engine.stats().running > 0; i++) await new Promise((res) => setTimeout(res, 10));
    assert.equal(t.engine.stats().running, 0);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(metrics, /rill_requests_aborted_total\{[^}]*\} 1/);
  } finally {
    await t.close();
  }
});

Deno.test("queue full → 429 with Retry-After and the error shape; health still answers", async () => {
  const t = startTestServer({ queueSize: 1, stepDelayMs: 50 });
  try {
    const first = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    const second = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    assert.equal(second.status, 429);
    assert.equal(second.headers.get("retry-after"), "1");
    const body = await second.json();
    assert.equal(body.error.type, "rate_limit_error");
    assert.equal(body.error.code, "rate_limit_exceeded");
    await first.body!.cancel();
    assert.equal((await fetch(`${t.url}/health`)).status, 200);
  } finally {
    await t.close();
  }
});

Deno.test("previous_response_id continues the conversation without the previous instructions", async () => {
  const t = startTestServer();
  try {
    const first = await (await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      instructions: "SECRET-INSTRUCTIONS",
      input: "What is the weather?",
      tools: [WEATHER_TOOL],
    })).json();
    assert.equal(first.output.at(-1).type, "function_call");
    const call = first.output.at(-1);
    const second = await (await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: '{"sky":"sunny"}' }],
      tools: [WEATHER_TOOL],
    })).json();
    assert.equal(second.status, "completed");
    assert.equal(second.previous_response_id, first.id);
    const prompt = tokenizer().decode(t.engine.requests[1]!.promptTokens);
    assert.ok(!prompt.includes("SECRET-INSTRUCTIONS"), "previous instructions leaked into the prompt");
    assert.ok(prompt.includes("What is the weather?"));
    assert.ok(prompt.includes("Need a tool."), "previous reasoning (of the open tool loop) missing");
    assert.ok(prompt.includes('{"city":"Paris"}'), "previous tool call missing");
    assert.ok(prompt.includes('{"sky":"sunny"}'), "tool output missing");
    assert.equal(second.output.at(-1).content[0].text, "It is sunny in Paris.");

    const unknown = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      previous_response_id: "resp_doesnotexist",
      input: "x",
    });
    assert.equal(unknown.status, 404);
    const err = await unknown.json();
    assert.equal(err.error.param, "previous_response_id");
  } finally {
    await t.close();
  }
});

Deno.test("store:false is not retrievable; DELETE removes a stored response", async () => {
  const t = startTestServer();
  try {
    const unstored = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", store: false }))
      .json();
    assert.equal(unstored.store, false);
    assert.equal((await (await fetch(`${t.baseURL}/responses/${unstored.id}`)).json()).error.code, "not_found");

    const stored = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" })).json();
    const del = await fetch(`${t.baseURL}/responses/${stored.id}`, { method: "DELETE" });
    assert.deepEqual(await del.json(), { id: stored.id, object: "response", deleted: true });
    assert.equal((await fetch(`${t.baseURL}/responses/${stored.id}`)).status, 404);
    const again = await fetch(`${t.baseURL}/responses/${stored.id}`, { method: "DELETE" });
    assert.equal(again.status, 404);
    await again.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("replay with starting_after yields exactly the suffix of the original events", async () => {
  const t = startTestServer();
  try {
    const original = sseCheck(
      await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true })).text(),
    );
    const id = terminal(original).id;
    const replay = sseCheck(await (await fetch(`${t.baseURL}/responses/${id}?stream=true`)).text());
    assert.deepEqual(replay, original);
    const n = 3;
    const tail = validateSSE(
      await (await fetch(`${t.baseURL}/responses/${id}?stream=true&starting_after=${n}`)).text(),
    );
    assert.deepEqual(tail.events, original.slice(n + 1));
    const past = await (await fetch(`${t.baseURL}/responses/${id}?stream=true&starting_after=${original.length + 5}`))
      .text();
    assert.equal(past, "");
    for (const bad of ["-2", "1.5", "abc"]) {
      const r = await fetch(`${t.baseURL}/responses/${id}?stream=true&starting_after=${bad}`);
      assert.equal(r.status, 400, bad);
      assert.equal((await r.json()).error.param, "starting_after");
    }
  } finally {
    await t.close();
  }
});

Deno.test("background: returns queued at once, completes without a client, can be tailed from the start", async () => {
  const t = startTestServer({ stepDelayMs: 5 });
  try {
    const created = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", background: true }))
      .json();
    assert.equal(created.status, "queued");
    assert.equal(created.background, true);
    const tailed = sseCheck(await (await fetch(`${t.baseURL}/responses/${created.id}?stream=true`)).text(), {
      background: true,
    });
    assert.equal(terminal(tailed).status, "completed");
    const polled = await (await fetch(`${t.baseURL}/responses/${created.id}`)).json();
    assert.equal(polled.status, "completed");
    // Cancelling a finished background response is idempotent: it returns the final response.
    const cancel = await fetch(`${t.baseURL}/responses/${created.id}/cancel`, { method: "POST" });
    assert.equal(cancel.status, 200);
    assert.equal((await cancel.json()).status, "completed");
  } finally {
    await t.close();
  }
});

Deno.test("background cancel stops the generation, ends open tails and stays cancelled", async () => {
  const t = startTestServer({ stepDelayMs: 30, chunking: "one" });
  try {
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", background: true, stream: true });
    const reader = r.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const id = /"id":"(resp_[0-9a-f]+)"/.exec(first)![1]!;
    const cancel = await fetch(`${t.baseURL}/responses/${id}/cancel`, { method: "POST" });
    assert.equal((await cancel.json()).status, "cancelled");
    // The open stream ends (no hang).
    for (;;) if ((await reader.read()).done) break;
    assert.equal(t.engine.stats().running, 0);
    const again = await (await fetch(`${t.baseURL}/responses/${id}/cancel`, { method: "POST" })).json();
    assert.equal(again.status, "cancelled");
    await new Promise((res) => setTimeout(res, 50));
    assert.equal((await (await fetch(`${t.baseURL}/responses/${id}`)).json()).status, "cancelled");
    const tail = await (await fetch(`${t.baseURL}/responses/${id}?stream=true`)).text();
    assert.match(tail, /response\.created/);

    const foreground = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" })).json();
    const bad = await fetch(`${t.baseURL}/responses/${foreground.id}/cancel`, { method: "POST" });
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("input_items lists the request's items with ids, desc by default, with limit/after/order", async () => {
  const t = startTestServer();
  try {
    const input = [
      { role: "developer", content: "be brief" },
      { role: "user", content: [{ type: "input_text", text: "one" }] },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "two" }] },
      { role: "user", content: "three" },
    ];
    const created = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input })).json();
    const all = await (await fetch(`${t.baseURL}/responses/${created.id}/input_items`)).json();
    assert.equal(all.object, "list");
    assert.equal(all.data.length, 4);
    assert.equal(all.data[0].content[0].text, "three");
    assert.ok(all.data.every((item: { id: string }) => typeof item.id === "string" && item.id.length > 0));
    const page = await (await fetch(`${t.baseURL}/responses/${created.id}/input_items?order=asc&limit=2`)).json();
    assert.equal(page.data.length, 2);
    assert.equal(page.has_more, true);
    assert.equal(page.data[0].content[0].text, "be brief");
    const next = await (await fetch(
      `${t.baseURL}/responses/${created.id}/input_items?order=asc&limit=2&after=${page.last_id}`,
    )).json();
    assert.deepEqual(next.data.map((i: { content: { text: string }[] }) => i.content[0]!.text), ["two", "three"]);
    assert.equal(next.has_more, false);
  } finally {
    await t.close();
  }
});

Deno.test("input_tokens equals usage.input_tokens of the same request", async () => {
  const t = startTestServer();
  try {
    const body = { model: MODEL, instructions: "Be nice.", input: "Count me", tools: [WEATHER_TOOL] };
    const counted = await (await postJson(`${t.baseURL}/responses/input_tokens`, body)).json();
    assert.equal(counted.object, "response.input_tokens");
    const created = await (await postJson(`${t.baseURL}/responses`, body)).json();
    assert.equal(counted.input_tokens, created.usage.input_tokens);
    assert.ok(counted.input_tokens > 10);
  } finally {
    await t.close();
  }
});

Deno.test("api key: 401 without or with a wrong key, 200 with it; /health stays open", async () => {
  const t = startTestServer({ server: { apiKey: "sk-test-123" } });
  try {
    const none = await fetch(`${t.baseURL}/models`);
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.type, "authentication_error");
    const wrong = await fetch(`${t.baseURL}/models`, { headers: { authorization: "Bearer sk-test-124" } });
    assert.equal(wrong.status, 401);
    await wrong.body?.cancel();
    const ok = await fetch(`${t.baseURL}/models`, { headers: { authorization: "Bearer sk-test-123" } });
    assert.equal(ok.status, 200);
    assert.equal((await ok.json()).data[0].id, MODEL);
    const health = await fetch(`${t.url}/health`);
    assert.equal(health.status, 200);
    await health.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("models, health and Prometheus metrics", async () => {
  const t = startTestServer();
  try {
    assert.deepEqual(await (await fetch(`${t.url}/health`)).json(), { status: "ok" });
    const model = await (await fetch(`${t.baseURL}/models/${MODEL}`)).json();
    assert.equal(model.id, MODEL);
    assert.equal(model.object, "model");
    assert.equal((await fetch(`${t.baseURL}/models/nope`)).status, 404);
    await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" })).json();
    const text = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(text, /rill_http_requests_total\{route="\/v1\/responses",status="200"\} 1/);
    assert.match(text, /rill_http_requests_total\{route="\/v1\/models\/\{id\}",status="404"\} 1/);
    assert.match(text, /rill_generation_tokens_total\{[^}]*\} [1-9]\d*/);
    assert.match(text, /rill_prompt_tokens_total\{[^}]*\} [1-9]\d*/);
    assert.match(text, /rill_time_to_first_token_seconds_count\{[^}]*\} 1/);
    assert.match(text, /rill_time_per_output_token_seconds_bucket\{[^}]*le="\+Inf"\} 1/);
    assert.match(text, /rill_num_requests_running\{[^}]*\} 0/);
    assert.match(text, /rill_num_requests_waiting\{[^}]*\} 0/);
    assert.match(text, /rill_kv_cache_usage_perc\{[^}]*\} 0/);
    assert.match(text, /rill_requests_aborted_total\{[^}]*\} 0/);
  } finally {
    await t.close();
  }
});

Deno.test("max_output_tokens cuts the answer: response.incomplete with reason max_output_tokens", async () => {
  const t = startTestServer();
  try {
    const events = sseCheck(
      await (await postJson(`${t.baseURL}/responses`, {
        model: MODEL,
        input: "hi",
        stream: true,
        max_output_tokens: 12,
      })).text(),
    );
    const final = terminal(events);
    assert.equal(events.at(-1)!.type, "response.incomplete");
    assert.deepEqual(final.incomplete_details, { reason: "max_output_tokens" });
    assert.equal((final.usage as { output_tokens: number }).output_tokens, 12);
  } finally {
    await t.close();
  }
});

Deno.test("an engine failure after SSE headers becomes error + response.failed, and leaks nothing", async () => {
  const tok = tokenizer();
  const t = startTestServer({
    script: () => {
      throw new Error("CUDA exploded at /secret/path");
    },
  });
  try {
    // The ScriptedEngine calls the script inside generate(): a synchronous failure there is a 500 before headers.
    const early = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    assert.equal(early.status, 500);
    const text = await early.text();
    assert.ok(!text.includes("secret") && !text.includes("CUDA"), text);
  } finally {
    await t.close();
  }
  const failing = startTestServer({ script: tok.encode("<|channel|>final<|message|>partial") });
  // Replace generate with one whose stream errors mid-way.
  const original = failing.engine.generate.bind(failing.engine);
  failing.engine.generate = (request) => {
    const reader = original(request).getReader();
    let n = 0;
    return new ReadableStream({
      async pull(c) {
        if (n++ === 3) throw new Error("backend died");
        const r = await reader.read();
        if (r.done) await c.close();
        else c.enqueue(r.value);
      },
    });
  };
  try {
    const r = await postJson(`${failing.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    assert.equal(r.status, 200);
    const events = sseCheck(await r.text());
    assert.deepEqual(events.slice(-2).map((e) => e.type), ["error", "response.failed"]);
    assert.equal((await fetch(`${failing.url}/health`)).status, 200);
  } finally {
    await failing.close();
  }
});

Deno.test("chat completions: non-streamed with reasoning_content and tool_calls; streamed with usage", async () => {
  const t = startTestServer();
  try {
    const plain = await (await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    })).json();
    assert.equal(plain.object, "chat.completion");
    assert.equal(plain.choices[0].message.content, ANSWER);
    assert.equal(plain.choices[0].message.reasoning_content, REASONING);
    assert.equal(plain.choices[0].finish_reason, "stop");
    assert.equal(plain.usage.total_tokens, plain.usage.prompt_tokens + plain.usage.completion_tokens);

    const tools = [{ type: "function", function: { name: "get_weather", parameters: WEATHER_TOOL.parameters } }];
    const call = await (await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "weather?" }],
      tools,
    })).json();
    assert.equal(call.choices[0].finish_reason, "tool_calls");
    assert.equal(call.choices[0].message.tool_calls[0].function.name, "get_weather");
    assert.equal(call.choices[0].message.tool_calls[0].function.arguments, '{"city":"Paris"}');

    const r = await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "weather?" }],
      tools,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(r.headers.get("content-type"), "text/event-stream");
    const lines = (await r.text()).split("\n\n").filter((l) => l !== "");
    assert.equal(lines.at(-1), "data: [DONE]");
    const chunks = lines.slice(0, -1).map((l) => JSON.parse(l.slice("data: ".length)));
    assert.equal(chunks[0].choices[0].delta.role, "assistant");
    const args = chunks.flatMap((c) => c.choices).flatMap((
      ch: { delta: { tool_calls?: { function: { arguments: string } }[] } },
    ) => ch.delta.tool_calls ?? []).map((tc: { function: { arguments: string } }) => tc.function.arguments).join("");
    assert.equal(args, '{"city":"Paris"}');
    const reasoning = chunks.flatMap((c) => c.choices).map((ch: { delta: { reasoning_content?: string } }) =>
      ch.delta.reasoning_content ?? ""
    ).join("");
    assert.equal(reasoning, "Need a tool.");
    const finish = chunks.find((c) => c.choices[0]?.finish_reason);
    assert.equal(finish.choices[0].finish_reason, "tool_calls");
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.ok(usage.usage.completion_tokens > 0);
    assert.ok(chunks.slice(0, -1).every((c) => c.usage === null));
  } finally {
    await t.close();
  }
});

Deno.test("GET ?stream=true tails a running foreground stored response live until its terminal event", async () => {
  const t = startTestServer({ stepDelayMs: 15, chunking: "one" });
  try {
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    const reader = r.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const id = /"id":"(resp_[0-9a-f]+)"/.exec(first)![1]!;
    const tail = await (await fetch(`${t.baseURL}/responses/${id}?stream=true`)).text();
    const events = sseCheck(tail);
    assert.equal(events.at(-1)!.type, "response.completed");
    for (;;) if ((await reader.read()).done) break;
  } finally {
    await t.close();
  }
});

Deno.test("a store that fails mid-stream does not break the client's stream", async () => {
  const errors: unknown[] = [];
  const t = startTestServer({ stepDelayMs: 5, chunking: "one", server: { onError: (e) => errors.push(e) } });
  try {
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", stream: true });
    const reader = r.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    // Every write fails from here on, as the store reports a failed write: to the writer's onError.
    t.store.appendLater = (_id, _events, _snapshot, onError) => onError(new Error("disk full"));
    t.store.appendEvents = () => Promise.reject(new Error("disk full"));
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    assert.equal(terminal(sseCheck(text)).status, "completed");
    assert.ok(errors.some((e) => e instanceof Error && e.message === "disk full"));
  } finally {
    await t.close();
  }
});

Deno.test("include message.output_text.logprobs with top_logprobs streams logprobs on every text delta", async () => {
  const t = startTestServer();
  try {
    const r = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      stream: true,
      include: ["message.output_text.logprobs"],
      top_logprobs: 2,
    });
    const { events, violations } = validateSSE(await r.text(), { logprobs: true });
    assert.deepEqual(violations, []);
    const deltas = (events as { type: string; logprobs?: { top_logprobs: unknown[] }[] }[])
      .filter((e) => e.type === "response.output_text.delta");
    assert.ok(deltas.length > 0);
    for (const d of deltas) {
      assert.ok(d.logprobs!.length > 0);
      for (const lp of d.logprobs!) assert.equal(lp.top_logprobs.length, 2);
    }
    assert.equal(t.engine.requests[0]!.sampling.logprobs, 2);
    const plain = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", top_logprobs: 2 }))
      .json();
    assert.deepEqual(plain.output.at(-1).content[0].logprobs, []);
    assert.equal(t.engine.requests[1]!.sampling.logprobs, -1);
  } finally {
    await t.close();
  }
});

Deno.test("truncation auto drops the oldest turns until the prompt fits; disabled answers 400", async () => {
  const t = startTestServer({ maxModelLen: 400 });
  try {
    const filler = "lorem ipsum dolor sit amet ".repeat(40);
    const input = [
      { role: "user", content: `OLDEST ${filler}` },
      { role: "assistant", content: `older answer ${filler}` },
      { role: "user", content: "NEWEST question" },
    ];
    const cut = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input,
      truncation: "auto",
      max_output_tokens: 5,
    });
    const body = await cut.json();
    assert.equal(cut.status, 200, JSON.stringify(body));
    assert.equal(body.truncation, "auto");
    const prompt = tokenizer().decode(t.engine.requests[0]!.promptTokens);
    assert.ok(!prompt.includes("OLDEST") && prompt.includes("NEWEST question"), prompt);
    const refused = await postJson(`${t.baseURL}/responses`, { model: MODEL, input });
    assert.equal(refused.status, 400);
    assert.equal((await refused.json()).error.code, "context_length_exceeded");
  } finally {
    await t.close();
  }
});

Deno.test("a chunked body without Content-Length is capped while it streams (413)", async () => {
  const t = startTestServer({ server: { maxBodyBytes: 1024 } });
  try {
    const big = new TextEncoder().encode(JSON.stringify({ model: MODEL, input: "x".repeat(4096) }));
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < big.length; i += 256) controller.enqueue(big.subarray(i, i + 256));
        controller.close();
      },
    });
    const r = await fetch(`${t.baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    assert.equal(r.status, 413);
    assert.equal((await r.json()).error.code, "request_too_large");
    const small = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(JSON.stringify({ model: MODEL, input: "hi" })));
        controller.close();
      },
    });
    const ok = await fetch(`${t.baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: small,
    });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("chat stream disconnect aborts the generation; /metrics shows running sequences meanwhile", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one" });
  try {
    const controller = new AbortController();
    const r = await fetch(`${t.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true }),
      signal: controller.signal,
    });
    const reader = r.body!.getReader();
    await reader.read();
    const during = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(during, /rill_num_requests_running\{[^}]*\} 1\n/);
    controller.abort();
    await reader.closed.catch(() => {});
    const request = t.engine.requests[0]!;
    for (let i = 0; i < 50 && !request.signal!.aborted; i++) await new Promise((res) => setTimeout(res, 10));
    assert.ok(request.signal!.aborted);
    for (let i = 0; i < 50 && t.engine.stats().running > 0; i++) await new Promise((res) => setTimeout(res, 10));
    assert.equal(t.engine.stats().running, 0);
  } finally {
    await t.close();
  }
});

Deno.test("a stored response left running by a stopped process reads as failed and its tail ends", async () => {
  const t = startTestServer();
  try {
    const orphan = { id: "resp_orphan", object: "response", status: "in_progress", background: true, output: [] };
    await t.store.create(orphan, [], { version: 1, items: [] });
    await t.store.appendEvents("resp_orphan", [{ type: "response.created", sequence_number: 0 }]);
    const got = await (await fetch(`${t.baseURL}/responses/resp_orphan`)).json();
    assert.equal(got.status, "failed");
    assert.equal(got.error.code, "server_error");
    const tail = await (await fetch(`${t.baseURL}/responses/resp_orphan?stream=true`)).text();
    assert.match(tail, /^event: response\.created/);
    const cancelled = await (await fetch(`${t.baseURL}/responses/resp_orphan/cancel`, { method: "POST" })).json();
    assert.equal(cancelled.status, "failed");
  } finally {
    await t.close();
  }
});
