import assert from "node:assert/strict";
import { itemsToMessages } from "../../../api/responses/conversation_items.ts";
import { parseInputItem } from "../../../api/responses/responses_schema.ts";

const parse = (items: unknown[]) => items.map((item, i) => parseInputItem(item, ["input", i]));

Deno.test("itemsToMessages: reasoning, text and calls of one turn merge into one assistant message", () => {
  const messages = itemsToMessages(parse([
    { role: "user", content: "weather?" },
    { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "need tool" }] },
    { type: "message", role: "assistant", content: [{ type: "output_text", text: "Let me check." }] },
    { type: "function_call", call_id: "c1", name: "get_weather", arguments: '{"city":"Paris"}' },
    { type: "function_call_output", call_id: "c1", output: "sunny" },
    { type: "message", role: "assistant", content: "It is sunny." },
  ]));
  assert.deepEqual(messages, [
    { role: "user", content: "weather?" },
    {
      role: "assistant",
      content: "Let me check.",
      reasoning: "need tool",
      toolCalls: [{ callId: "c1", name: "get_weather", arguments: '{"city":"Paris"}' }],
    },
    { role: "tool", callId: "c1", name: "get_weather", content: "sunny" },
    { role: "assistant", content: "It is sunny." },
  ]);
});

Deno.test("itemsToMessages: text after calls or reasoning after text starts a new assistant turn", () => {
  const messages = itemsToMessages(parse([
    { type: "function_call", call_id: "a", name: "f", arguments: "{}" },
    { type: "message", role: "assistant", content: "after call" },
    { type: "reasoning", summary: [{ type: "summary_text", text: "from summary" }] },
  ]));
  assert.deepEqual(messages, [
    { role: "assistant", content: "", toolCalls: [{ callId: "a", name: "f", arguments: "{}" }] },
    { role: "assistant", content: "after call" },
    { role: "assistant", content: "", reasoning: "from summary" },
  ]);
});

Deno.test("parseInputItem: string content and content lists; output as parts", () => {
  const [dev, user, out] = parse([
    { role: "developer", content: "rules" },
    { type: "message", role: "user", content: [{ type: "input_text", text: "a" }, { type: "input_text", text: "b" }] },
    { type: "function_call_output", call_id: "c", output: [{ type: "input_text", text: "x" }] },
  ]);
  assert.deepEqual(dev, { type: "message", role: "developer", content: [{ type: "input_text", text: "rules" }] });
  assert.deepEqual(itemsToMessages([user!]), [{ role: "user", content: "ab" }]);
  assert.deepEqual(out, { type: "function_call_output", call_id: "c", output: "x" });
});
