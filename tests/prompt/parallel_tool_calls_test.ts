import assert from "node:assert/strict";
import { chatmlFormat, MODEL, postJson, startTestServer, tokenizer } from "../../testing/test_server.ts";

const TOOL = { type: "function", name: "get_weather", parameters: { type: "object", properties: {} } };
const CHAT_TOOL = { type: "function", function: { name: "get_weather", parameters: { type: "object" } } };

Deno.test("parallel_tool_calls false: honoured by harmony models (one call, then stop)", async () => {
  const t = startTestServer();
  try {
    const r = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "weather?",
      tools: [TOOL],
      parallel_tool_calls: false,
    });
    const response = await r.json();
    assert.equal(r.status, 200);
    assert.equal(response.parallel_tool_calls, false);
    assert.equal(response.output.filter((i: { type: string }) => i.type === "function_call").length, 1);
  } finally {
    await t.close();
  }
});

const TWO_CALLS = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n' +
  '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>\nDone.<|endoftext|>';

Deno.test("parallel_tool_calls false: template models end the turn after the first complete call", async () => {
  const t = startTestServer({ script: tokenizer().encode(TWO_CALLS), server: { format: chatmlFormat() } });
  try {
    const responses = { model: MODEL, input: "weather?", tools: [TOOL], parallel_tool_calls: false };
    const r = await postJson(`${t.baseURL}/responses`, responses);
    const response = await r.json();
    assert.equal(r.status, 200);
    assert.equal(response.status, "completed");
    assert.deepEqual(
      response.output.map((i: { type: string; arguments?: string }) => [i.type, i.arguments]),
      [["function_call", '{"city": "Paris"}']],
    );
    // Generation itself is asked to stop where the first call closes.
    assert.deepEqual(t.engine.requests.at(-1)?.sampling.stopStrings, ["</tool_call>"]);

    const chat = {
      model: MODEL,
      messages: [{ role: "user", content: "weather?" }],
      tools: [CHAT_TOOL],
      parallel_tool_calls: false,
      stop: ["###"],
    };
    const c = await (await postJson(`${t.baseURL}/chat/completions`, chat)).json();
    assert.equal(c.choices[0].finish_reason, "tool_calls");
    assert.equal(c.choices[0].message.content, null);
    assert.deepEqual(
      c.choices[0].message.tool_calls.map((x: { function: { arguments: string } }) => x.function.arguments),
      ['{"city": "Paris"}'],
    );
    assert.deepEqual(t.engine.requests.at(-1)?.sampling.stopStrings, ["###", "</tool_call>"]);
    // input_tokens takes the parameter too.
    assert.equal((await postJson(`${t.baseURL}/responses/input_tokens`, responses)).status, 200);

    // Parallel calls allowed (the default): both calls, the text after them too, and no extra stop string.
    const all = await (await postJson(`${t.baseURL}/responses`, { ...responses, parallel_tool_calls: true })).json();
    assert.deepEqual(all.output.map((i: { type: string }) => i.type), ["function_call", "function_call", "message"]);
    assert.deepEqual(t.engine.requests.at(-1)?.sampling.stopStrings, []);
  } finally {
    await t.close();
  }
});

Deno.test("max_tool_calls caps the calls of a response (0: none); the response echoes it", async () => {
  const t = startTestServer({ script: tokenizer().encode(TWO_CALLS), server: { format: chatmlFormat() } });
  try {
    const base = { model: MODEL, input: "weather?", tools: [TOOL] };
    const calls = async (max: number) => {
      const r = await (await postJson(`${t.baseURL}/responses`, { ...base, max_tool_calls: max })).json();
      assert.equal(r.max_tool_calls, max);
      assert.equal(r.status, "completed");
      return r.output.filter((i: { type: string }) => i.type === "function_call").length;
    };
    assert.equal(await calls(2), 2);
    assert.deepEqual(t.engine.requests.at(-1)?.sampling.stopStrings, []);
    assert.equal(await calls(1), 1);
    assert.deepEqual(t.engine.requests.at(-1)?.sampling.stopStrings, ["</tool_call>"]);
    assert.equal(await calls(0), 0);
  } finally {
    await t.close();
  }
});
