import assert from "node:assert/strict";
import { HfTokenizer } from "../../checkpoint/hf_tokenizer.ts";
import type { PromptInput } from "../../prompt/conversation.ts";
import {
  createTemplateFormat,
  endsInOpenReasoning,
  TemplateFormatError,
  toTemplateMessages,
} from "../../prompt/template_format.ts";
import type { Segment } from "../../parsers/segment.ts";

const FIXTURES = new URL("../fixtures/tokenizers/", import.meta.url);
const tokenizer = HfTokenizer.fromJSON(JSON.parse(Deno.readTextFileSync(new URL("byte_level.json", FIXTURES))));
const TEMPLATE = Deno.readTextFileSync(new URL("chatml_think_tools.jinja", FIXTURES));
const format = createTemplateFormat(tokenizer, TEMPLATE, { eosTokenIds: [tokenizer.specialId("<|endoftext|>")!] });

const WEATHER = {
  name: "get_weather",
  description: "Current weather for a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const TIME = { name: "get_time", parameters: { type: "object", properties: {} } };

const TOOLS_HEADER = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
const TOOLS_FOOTER = "\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
  'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n' +
  "</tool_call><|im_end|>\n";
const WEATHER_JSON = '{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a ' +
  'city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}';
const TIME_JSON = '{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", ' +
  '"properties": {}}}}';

function input(partial: Partial<PromptInput> & Pick<PromptInput, "messages">): PromptInput {
  return { tools: [], toolChoice: "auto", ...partial };
}

Deno.test("plain chat: instructions and system messages merge into one system turn", () => {
  const text = format.renderText(input({
    instructions: "Be brief.",
    messages: [{ role: "developer", content: "Answer in French." }, { role: "user", content: "Hi!" }],
  }));
  assert.equal(
    text,
    "<|im_start|>system\nBe brief.\n\nAnswer in French.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n" +
      "<|im_start|>assistant\n",
  );
  assert.equal(
    format.renderText(input({ messages: [{ role: "user", content: "Hi!" }] })),
    "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
  );
});

Deno.test("tool round trip: tools, reasoning of the current loop, tool_calls with object arguments, tool response", () => {
  const text = format.renderText(input({
    instructions: "Be brief.",
    tools: [WEATHER],
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "",
        reasoning: "\nI need the tool.\n",
        toolCalls: [{ callId: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
      },
      { role: "tool", callId: "call_1", content: '{"temp_c": 21}' },
    ],
  }));
  assert.equal(
    text,
    "<|im_start|>system\nBe brief.\n\n" + TOOLS_HEADER + WEATHER_JSON + TOOLS_FOOTER +
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
      '<|im_start|>assistant\n<think>\nI need the tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": ' +
      '{"city": "Paris"}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\n{"temp_c": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
  );
});

Deno.test("history: reasoning before the latest user query is dropped; parallel calls and consecutive tool results", () => {
  const text = format.renderText(input({
    tools: [WEATHER, TIME],
    messages: [
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello!", reasoning: "greet back" },
      { role: "user", content: "Paris weather and time?" },
      {
        role: "assistant",
        content: "Checking.",
        toolCalls: [
          { callId: "a", name: "get_weather", arguments: '{"city": "Paris"}' },
          { callId: "b", name: "get_time", arguments: "not json" },
        ],
      },
      { role: "tool", callId: "a", content: "sunny" },
      { role: "tool", callId: "b", content: "12:00" },
    ],
  }));
  assert.equal(
    text,
    "<|im_start|>system\n" + TOOLS_HEADER + WEATHER_JSON + "\n" + TIME_JSON + TOOLS_FOOTER +
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n" +
      "<|im_start|>user\nParis weather and time?<|im_end|>\n" +
      '<|im_start|>assistant\nChecking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n' +
      '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": not json}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n12:00\n</tool_response>" +
      "<|im_end|>\n<|im_start|>assistant\n",
  );
});

Deno.test("HF message shapes: tool_calls objects, tool_call_id and the tool name looked up by call id", () => {
  const msgs = toTemplateMessages(input({
    messages: [
      { role: "user", content: "x" },
      { role: "assistant", content: "", toolCalls: [{ callId: "c9", name: "get_time", arguments: '{"tz":"UTC"}' }] },
      { role: "tool", callId: "c9", content: "noon" },
      { role: "system", content: "late system" },
    ],
  }));
  assert.deepEqual(msgs, [
    { role: "user", content: "x" },
    {
      role: "assistant",
      content: "",
      tool_calls: [{ id: "c9", type: "function", function: { name: "get_time", arguments: { tz: "UTC" } } }],
    },
    { role: "tool", content: "noon", tool_call_id: "c9", name: "get_time" },
    { role: "system", content: "late system" },
  ]);
});

Deno.test("tool_choice: none hides tools, a named choice shows only that tool", () => {
  const base = { tools: [WEATHER, TIME], messages: [{ role: "user", content: "q" }] } as const;
  assert.equal(
    format.renderText(input({ ...base, toolChoice: "none" })),
    "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n",
  );
  const named = format.renderText(input({ ...base, toolChoice: { type: "function", name: "get_time" } }));
  assert.ok(named.includes(TIME_JSON) && !named.includes("get_weather"));
  assert.ok(format.renderText(input({ ...base, toolChoice: "required" })).includes(WEATHER_JSON + "\n" + TIME_JSON));
});

Deno.test("enable_thinking false closes an empty think block in the prompt", () => {
  const noThink = createTemplateFormat(tokenizer, TEMPLATE, { enableThinking: false });
  assert.equal(
    noThink.renderText(input({ messages: [{ role: "user", content: "q" }] })),
    "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  assert.equal(noThink.startsInReasoning, false);
  assert.equal(format.startsInReasoning, false);
});

Deno.test("render encodes the prompt with special tokens as single ids", () => {
  const msg = input({ messages: [{ role: "user", content: "héllo 😀" }] });
  const ids = format.render(msg);
  const start = tokenizer.specialId("<|im_start|>")!;
  const end = tokenizer.specialId("<|im_end|>")!;
  assert.equal(ids.filter((id) => id === start).length, 2);
  assert.equal(ids.filter((id) => id === end).length, 1);
  assert.equal(tokenizer.decode(ids), format.renderText(msg));
});

Deno.test("stop tokens: <|im_end|>, <|endoftext|> and configured EOS, by id", () => {
  assert.deepEqual(
    [...format.stopTokens].sort(),
    [tokenizer.specialId("<|im_end|>")!, tokenizer.specialId("<|endoftext|>")!].sort(),
  );
  const custom = createTemplateFormat(tokenizer, TEMPLATE, { eosTokenIds: [7], eosToken: "<|endoftext|>" });
  assert.ok(custom.stopTokens.includes(7));
  assert.equal(new Set(custom.stopTokens).size, custom.stopTokens.length);
});

Deno.test("bos/eos tokens, reasoning effort and a tool_use template reach the template", () => {
  const t = createTemplateFormat(
    tokenizer,
    "{{ bos_token }}[{{ reasoning_effort }}]{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}",
    { bosToken: "<s>", eosToken: "</s>", toolUseTemplate: "TOOLS:{{ tools | length }}" },
  );
  assert.equal(
    t.renderText(input({ messages: [{ role: "user", content: "a" }], reasoningEffort: "high" })),
    "<s>[high]a</s>",
  );
  assert.equal(t.renderText(input({ messages: [{ role: "user", content: "a" }], tools: [WEATHER] })), "TOOLS:1");
});

Deno.test("template errors are TemplateFormatError", () => {
  assert.throws(() => createTemplateFormat(tokenizer, "{% if %}"), TemplateFormatError);
  const raising = createTemplateFormat(tokenizer, "{{ raise_exception('roles must alternate') }}");
  assert.throws(() => raising.renderText(input({ messages: [] })), /roles must alternate/);
});

Deno.test("endsInOpenReasoning looks only at the new assistant turn", () => {
  assert.equal(endsInOpenReasoning("<|im_start|>assistant\n<think>\n"), true);
  assert.equal(endsInOpenReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"), false);
  assert.equal(endsInOpenReasoning("<|im_start|>assistant\n<think>x<|im_end|>\n<|im_start|>assistant\n"), false);
  assert.equal(endsInOpenReasoning("<|im_start|>assistant\n"), false);
});

function parse(ids: number[], parser: ReturnType<typeof format.createParser>): Segment[] {
  return [...ids.flatMap((id) => parser.push(id)), ...parser.flush()];
}

Deno.test("a template that opens <think> in the prompt starts the parser in reasoning", () => {
  const prefill = TEMPLATE.replace(
    "{{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking",
    "{{- '<|im_start|>assistant\\n<think>\\n' }}\n    {%- if enable_thinking",
  );
  assert.notEqual(prefill, TEMPLATE);
  const thinking = createTemplateFormat(tokenizer, prefill);
  assert.ok(
    thinking.renderText(input({ messages: [{ role: "user", content: "q" }] })).endsWith("assistant\n<think>\n"),
  );
  assert.equal(thinking.startsInReasoning, true);
  const output = tokenizer.encode("hmm</think>\n\nhello<|im_end|>");
  const segments = parse(output, thinking.createParser({ toolNames: [] }));
  assert.deepEqual(segments[0], { kind: "open", item: { type: "reasoning" } });
  const plain = parse(output, format.createParser({ toolNames: [] }));
  assert.deepEqual(plain[0], { kind: "open", item: { type: "message" } });
});

Deno.test("the parser recognises tool calls for the request's tools", () => {
  const output = tokenizer.encode(
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
  );
  const segments = parse(output, format.createParser({ toolNames: ["get_weather"] }));
  assert.deepEqual(segments[0], { kind: "open", item: { type: "function_call", name: "get_weather" } });
  const args = segments.flatMap((s) => (s.kind === "delta" ? [s.text] : [])).join("");
  assert.deepEqual(JSON.parse(args), { city: "Paris" });
});

Deno.test("constraint layout: the constrained part follows </think> when the model reasons, else starts the output", () => {
  assert.equal(format.constraintLayout.opening, "</think>\n\n");
  const plain = createTemplateFormat(
    tokenizer,
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n",
  );
  assert.equal(plain.constraintLayout.opening, "");
  const closed = createTemplateFormat(
    tokenizer,
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  assert.equal(closed.constraintLayout.opening, "");
});
