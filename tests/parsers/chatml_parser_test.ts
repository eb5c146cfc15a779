import assert from "node:assert/strict";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { collectItems, runParser, summary } from "../../testing/collect_items.ts";
import { ScriptTokenizer } from "../../testing/script_tokenizer.ts";

const SPECIALS = [
  { text: "<|im_start|>", control: true },
  { text: "<|im_end|>", control: true },
  { text: "<|endoftext|>", control: true },
  { text: "<think>", control: false },
  { text: "</think>", control: false },
  { text: "<tool_call>", control: false },
  { text: "</tool_call>", control: false },
];

function parse(text: string, opts: { tools?: string[]; startInReasoning?: boolean; ordinary?: boolean } = {}) {
  const tok = new ScriptTokenizer(SPECIALS);
  const ids = opts.ordinary ? tok.encodeOrdinary(text) : tok.encode(text);
  const parser = new ChatmlParser(tok, {
    toolNames: opts.tools ?? [],
    ...(opts.startInReasoning !== undefined ? { startInReasoning: opts.startInReasoning } : {}),
  });
  return collectItems(runParser(parser, ids));
}

Deno.test("text only", () => {
  assert.deepEqual(summary(parse("Hello, world!<|im_end|>")), [["message", "Hello, world!"]]);
  assert.deepEqual(parse("Hi<|im_end|>")[0]?.reason, "end");
  assert.deepEqual(parse("Hi")[0]?.reason, "implicit");
});

Deno.test("think then text, with the newline conventions", () => {
  const items = parse("<think>\nLet me think.\nDone.\n</think>\n\nThe answer is 4.<|im_end|>");
  assert.deepEqual(summary(items), [["reasoning", "Let me think.\nDone."], ["message", "The answer is 4."]]);
  assert.deepEqual(items.map((i) => i.reason), ["end", "end"]);
});

Deno.test("prompt opened inside reasoning", () => {
  assert.deepEqual(summary(parse("Thinking...\n</think>\n\nHi", { startInReasoning: true })), [
    ["reasoning", "Thinking..."],
    ["message", "Hi"],
  ]);
});

Deno.test("think, several tool calls, then text", () => {
  const out = parse(
    '<think>\nplan\n</think>\n\nLet me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": "{\\"tz\\": \\"CET\\"}"}\n</tool_call>\nDone.',
    { tools: ["get_weather", "get_time"] },
  );
  assert.deepEqual(summary(out), [
    ["reasoning", "plan"],
    ["message", "Let me check."],
    ["function_call:get_weather", '{"city": "Paris"}'],
    ["function_call:get_time", '{"tz": "CET"}'],
    ["message", "Done."],
  ]);
});

Deno.test("markers as plain text split across tokens behave like special tokens", () => {
  const text =
    '<think>\nhmm\n</think>\n\nOK <tool_call>\n{"name": "f", "arguments": {"a": [1, {"b": "}"}]}}\n</tool_call>';
  assert.deepEqual(summary(parse(text, { tools: ["f"], ordinary: true })), summary(parse(text, { tools: ["f"] })));
  assert.deepEqual(summary(parse(text, { tools: ["f"], ordinary: true })), [
    ["reasoning", "hmm"],
    ["message", "OK"],
    ["function_call:f", '{"a": [1, {"b": "}"}]}'],
  ]);
});

Deno.test("malformed tool JSON degrades to the raw text", () => {
  const raw = "<tool_call>\nnot json at all\n</tool_call>";
  assert.deepEqual(summary(parse(`Hi\n${raw}\nbye`, { tools: ["f"] })), [["message", `Hi\n${raw}\nbye`]]);
  const broken = '<tool_call>{"name" "f"}</tool_call>';
  assert.deepEqual(summary(parse(broken, { tools: ["f"] })), [["message", broken]]);
});

Deno.test("unknown tool name and no tools requested leave tool markup as text", () => {
  const call = '<tool_call>{"name": "nope", "arguments": {}}</tool_call>';
  assert.deepEqual(summary(parse(call, { tools: ["f"] })), [["message", call]]);
  const known = '<tool_call>{"name": "f", "arguments": {}}</tool_call>';
  assert.deepEqual(summary(parse(known)), [["message", known]]);
});

Deno.test("a call without arguments gets {} and arguments before the name are kept", () => {
  assert.deepEqual(summary(parse('<tool_call>{"name": "f"}</tool_call>', { tools: ["f"] })), [[
    "function_call:f",
    "{}",
  ]]);
  assert.deepEqual(summary(parse('<tool_call>{"arguments": {"x": 1}, "name": "f"}</tool_call>', { tools: ["f"] })), [
    ["function_call:f", '{"x": 1}'],
  ]);
});

Deno.test("truncated output inside a call closes it implicitly; inside markup prefix it is text", () => {
  const items = parse('<tool_call>{"name": "f", "arguments": {"x": "ab', { tools: ["f"] });
  assert.deepEqual(summary(items), [["function_call:f", '{"x": "ab']]);
  assert.equal(items[0]?.reason, "implicit");
  assert.deepEqual(summary(parse("Hello <thi")), [["message", "Hello <thi"]]);
  assert.deepEqual(summary(parse('<tool_call>{"na', { tools: ["f"] })), [["message", '<tool_call>{"na']]);
});

Deno.test("stop tokens end the output and control tokens never show", () => {
  assert.deepEqual(summary(parse("A<|im_start|>B<|im_end|>C")), [["message", "AB"]]);
  assert.deepEqual(summary(parse("A<|endoftext|>C")), [["message", "A"]]);
});
