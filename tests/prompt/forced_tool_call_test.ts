/**
 * tool_choice "required" and a named choice: each format ends the prompt inside a tool call's opening and its parser
 * reads the same opening, so whatever the model writes next is that call's arguments (named) or a tool name and
 * its arguments (required with several tools). Before, both choices were only hints and the model could answer in
 * text or call another tool (invariant 73).
 */
import assert from "node:assert/strict";
import type { PromptInput, ToolChoice } from "../../prompt/conversation.ts";
import { forcedCall } from "../../prompt/forced_tool_call.ts";
import { createHarmonyFormat } from "../../prompt/harmony_format.ts";
import { HfTokenizer } from "../../checkpoint/hf_tokenizer.ts";
import { createTemplateFormat } from "../../prompt/template_format.ts";
import type { ChatFormat } from "../../prompt/chat_format.ts";
import type { Segment } from "../../parsers/segment.ts";
import { o200kTokenizer } from "../../testing/o200k_tokenizer.ts";

const harmonyTok = o200kTokenizer();
const harmony = createHarmonyFormat(harmonyTok, { date: "2025-06-28" });
const FIXTURES = new URL("../fixtures/tokenizers/", import.meta.url);
const chatmlTok = HfTokenizer.fromJSON(JSON.parse(Deno.readTextFileSync(new URL("byte_level.json", FIXTURES))));
const chatml = createTemplateFormat(
  chatmlTok,
  Deno.readTextFileSync(new URL("chatml_think_tools.jinja", FIXTURES)),
  { eosTokenIds: [chatmlTok.specialId("<|endoftext|>")!] },
);

const TOOLS = [
  { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  { name: "get_time", parameters: { type: "object", properties: {} } },
];
const NAMES = TOOLS.map((t) => t.name);

function prompt(toolChoice: ToolChoice, tools = TOOLS): PromptInput {
  return { messages: [{ role: "user", content: "Weather in Paris?" }], tools, toolChoice };
}

/** The model's output after the prompt, through a parser made for the same choice. */
function run(format: ChatFormat, toolChoice: ToolChoice, output: number[], toolNames = NAMES): Segment[] {
  const parser = format.createParser({ toolNames, toolChoice });
  return [...output.flatMap((id) => parser.push(id)), ...parser.flush()];
}

function opened(segments: Segment[]): unknown[] {
  return segments.flatMap((s) => (s.kind === "open" ? [s.item] : []));
}

function text(segments: Segment[]): string {
  return segments.flatMap((s) => (s.kind === "delta" ? [s.text] : [])).join("");
}

Deno.test("forcedCall: auto and none are free, required with one tool names it, a named choice names its tool", () => {
  assert.deepEqual(forcedCall("auto", NAMES), { kind: "free" });
  assert.deepEqual(forcedCall("none", NAMES), { kind: "free" });
  assert.deepEqual(forcedCall(undefined, NAMES), { kind: "free" });
  assert.deepEqual(forcedCall("required", []), { kind: "free" });
  assert.deepEqual(forcedCall("required", NAMES), { kind: "any" });
  assert.deepEqual(forcedCall("required", ["get_time"]), { kind: "named", name: "get_time" });
  assert.deepEqual(forcedCall({ type: "function", name: "get_time" }, NAMES), { kind: "named", name: "get_time" });
});

Deno.test("harmony: auto renders no prefill; a named choice prefills the call header up to <|message|>", () => {
  const free = harmony.render(prompt("auto"));
  const named = harmony.render(prompt({ type: "function", name: "get_time" }));
  assert.deepEqual(named.slice(0, free.length), free);
  assert.equal(
    harmonyTok.decode(named.slice(free.length)),
    " to=functions.get_time<|channel|>commentary <|constrain|>json<|message|>",
  );
  const segments = run(harmony, { type: "function", name: "get_time" }, harmonyTok.encode("{}<|call|>"));
  assert.deepEqual(opened(segments), [{ type: "function_call", name: "get_time" }]);
  assert.equal(text(segments), "{}");
});

Deno.test("harmony: required with several tools prefills up to the name, which the model writes", () => {
  const free = harmony.render(prompt("auto"));
  const any = harmony.render(prompt("required"));
  assert.equal(harmonyTok.decode(any.slice(free.length)), " to=functions.");
  const output = harmonyTok.encode(
    'get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
  );
  const segments = run(harmony, "required", output);
  assert.deepEqual(opened(segments), [{ type: "function_call", name: "get_weather" }]);
  assert.equal(text(segments), '{"city":"Paris"}');
});

Deno.test("harmony: a call the model stops at once still opens the forced item", () => {
  const segments = run(harmony, "required", [], ["get_weather"]);
  assert.deepEqual(opened(segments), [{ type: "function_call", name: "get_weather" }]);
});

Deno.test("chatml: a named choice prefills an empty think and the call up to its arguments", () => {
  const named = chatmlTok.decode(chatml.render(prompt({ type: "function", name: "get_weather" })));
  assert.ok(named.endsWith('assistant\n<think>\n\n</think>\n\n<tool_call>{"name": "get_weather", "arguments":'));
  const output = chatmlTok.encode(' {"city": "Paris"}}</tool_call><|im_end|>');
  const segments = run(chatml, { type: "function", name: "get_weather" }, output);
  // The prompt's empty think block is not the model's: no empty reasoning item.
  assert.deepEqual(opened(segments), [{ type: "function_call", name: "get_weather" }]);
  assert.deepEqual(JSON.parse(text(segments)), { city: "Paris" });
});

Deno.test("chatml: required with several tools prefills up to the name, which the model writes", () => {
  const named = chatml.render(prompt("required"));
  assert.ok(chatmlTok.decode(named).endsWith('<tool_call>{"name":'));
  const output = chatmlTok.encode(' "get_time", "arguments": {}}</tool_call><|im_end|>');
  const segments = run(chatml, "required", output);
  assert.deepEqual(opened(segments), [{ type: "function_call", name: "get_time" }]);
  assert.equal(text(segments), "{}");
});

Deno.test("chatml: auto and none render exactly the template's prompt", () => {
  for (const choice of ["auto", "none"] as const) {
    const p = prompt(choice);
    assert.deepEqual(chatml.render(p), chatmlTok.encode(chatml.renderText(p)));
  }
});
