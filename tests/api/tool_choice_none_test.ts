/**
 * tool_choice "none" forbids calls: the tools are not shown to the model, and a call it writes anyway is parsed as a
 * call to a tool that was not offered — a plain message (the rule for both formats), never a function_call.
 */
import assert from "node:assert/strict";
import { chatmlFormat, MODEL, postJson, startTestServer, tokenizer } from "../../testing/test_server.ts";

const TOOL = { type: "function", name: "get_weather", parameters: { type: "object", properties: {} } };
const CHAT_TOOL = { type: "function", function: { name: "get_weather", parameters: { type: "object" } } };
const CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><|endoftext|>';

Deno.test("tool_choice none: a call the model writes anyway is not a function_call (Responses and Chat)", async () => {
  const t = startTestServer({ script: tokenizer().encode(CALL), server: { format: chatmlFormat() } });
  try {
    const auto = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "w?", tools: [TOOL] })).json();
    assert.deepEqual(auto.output.map((i: { type: string }) => i.type), ["function_call"], "the script is a call");
    const none = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "w?",
      tools: [TOOL],
      tool_choice: "none",
    });
    assert.equal(none.status, 200);
    const body = await none.json();
    assert.deepEqual(body.output.map((i: { type: string }) => i.type), ["message"]);
    const chat = await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "w?" }],
      tools: [CHAT_TOOL],
      tool_choice: "none",
    });
    const choice = (await chat.json()).choices[0];
    assert.equal(choice.message.tool_calls, undefined);
    assert.equal(choice.finish_reason, "stop");
  } finally {
    await t.close();
  }
});
