/**
 * A `tool` message answers a call of an earlier assistant message. One whose `tool_call_id` names no such call would
 * be rendered to the model under a made-up function name (harmony: `functions.unknown`): it is a 400 naming the
 * message, as OpenAI answers, while a proper round trip still works.
 */
import assert from "node:assert/strict";
import { ChatCompletionSchema, chatMessages } from "../../../api/chat/chat_schema.ts";
import { ApiError } from "../../../prompt/errors.ts";
import { MODEL, postJson, startTestServer } from "../../../testing/test_server.ts";

const call = { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } };

Deno.test("chatMessages: a tool message must answer an earlier assistant tool call", () => {
  const orphan = ChatCompletionSchema.parse({
    model: MODEL,
    messages: [{ role: "user", content: "weather?" }, { role: "tool", tool_call_id: "call_9", content: "sunny" }],
  });
  assert.throws(() => chatMessages(orphan), (e) => e instanceof ApiError && e.param === "messages[1].tool_call_id");
  // A call made after the tool message does not count.
  const late = ChatCompletionSchema.parse({
    model: MODEL,
    messages: [
      { role: "user", content: "weather?" },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
      { role: "assistant", content: null, tool_calls: [call] },
    ],
  });
  assert.throws(() => chatMessages(late), (e) => e instanceof ApiError && e.param === "messages[1].tool_call_id");
  const ok = ChatCompletionSchema.parse({
    model: MODEL,
    messages: [
      { role: "user", content: "weather?" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
    ],
  });
  assert.deepEqual(chatMessages(ok)[2], { role: "tool", callId: "call_1", content: "sunny", name: "get_weather" });
});

Deno.test("POST /v1/chat/completions: an orphan tool message is a 400 with the OpenAI error shape", async () => {
  const t = startTestServer();
  try {
    const r = await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "weather?" }, { role: "tool", tool_call_id: "nope", content: "sunny" }],
    });
    assert.equal(r.status, 400);
    const body = await r.json();
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(body.error.param, "messages[1].tool_call_id");
    assert.match(body.error.message, /nope/);
  } finally {
    await t.close();
  }
});
