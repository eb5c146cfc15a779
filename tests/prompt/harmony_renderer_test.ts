import assert from "node:assert/strict";
import { harmonyPromptText, renderHarmony } from "../../prompt/harmony_renderer.ts";
import type { FunctionTool, PromptInput } from "../../prompt/conversation.ts";

const GET_WEATHER: FunctionTool = {
  name: "get_weather",
  description: "Get the weather.",
  parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] },
};

/** harmony.md §1.11, the full prompt. */
const PROMPT_1_11: PromptInput = {
  instructions: "Be brief.",
  messages: [{ role: "user", content: "Weather in Tokyo?" }],
  tools: [GET_WEATHER],
  toolChoice: "auto",
  reasoningEffort: "low",
};

const TEXT_1_11 = `<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-06-28

Reasoning: low

# Valid channels: analysis, commentary, final. Channel must be included for every message.
Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions

Be brief.

# Tools

## functions

namespace functions {

// Get the weather.
type get_weather = (_: {
location: string,
}) => any;

} // namespace functions<|end|><|start|>user<|message|>Weather in Tokyo?<|end|><|start|>assistant`;

function text(input: PromptInput): string {
  return harmonyPromptText(renderHarmony(input, { date: "2025-06-28" }));
}

Deno.test("renderHarmony reproduces the harmony.md §1.11 prompt byte for byte", () => {
  assert.equal(text(PROMPT_1_11), TEXT_1_11);
});

Deno.test("renderHarmony reproduces harmony's test_render_functions_with_parameters (kitchensink schema)", () => {
  const input: PromptInput = {
    instructions: "Always respond in riddles",
    messages: [{ role: "user", content: "What is the weather like in SF?" }],
    toolChoice: "auto",
    reasoningEffort: "high",
    tools: [
      { name: "get_location", description: "Gets the location of the user." },
      {
        name: "get_current_weather",
        description: "Gets the current weather in the provided location.",
        parameters: {
          type: "object",
          properties: {
            location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
            format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
          },
          required: ["location"],
        },
      },
      {
        name: "get_multiple_weathers",
        description: "Gets the current weather in the provided list of locations.",
        parameters: {
          type: "object",
          properties: {
            locations: {
              type: "array",
              items: { type: "string" },
              description: 'List of city and state, e.g. ["San Francisco, CA", "New York, NY"]',
            },
            format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
          },
          required: ["locations"],
        },
      },
      {
        name: "kitchensink",
        description: "A function with various complex schemas.",
        parameters: {
          description: "params object",
          type: "object",
          properties: {
            string: { type: "string", title: "STRING", description: "A string", examples: ["hello", "world"] },
            string_nullable: {
              type: "string",
              nullable: true,
              description: "A nullable string",
              default: "the default",
            },
            string_enum: { type: "string", enum: ["a", "b", "c"] },
            oneof_string_or_number: {
              oneOf: [
                { type: "string", default: "default_string_in_oneof" },
                { type: "number", description: "numbers can happen too" },
              ],
              description: "a oneof",
              default: 20,
            },
          },
        },
      },
    ],
  };
  assert.equal(
    text(input),
    `<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-06-28

Reasoning: high

# Valid channels: analysis, commentary, final. Channel must be included for every message.
Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions

Always respond in riddles

# Tools

## functions

namespace functions {

// Gets the location of the user.
type get_location = () => any;

// Gets the current weather in the provided location.
type get_current_weather = (_: {
// The city and state, e.g. San Francisco, CA
location: string,
format?: "celsius" | "fahrenheit", // default: celsius
}) => any;

// Gets the current weather in the provided list of locations.
type get_multiple_weathers = (_: {
// List of city and state, e.g. ["San Francisco, CA", "New York, NY"]
locations: string[],
format?: "celsius" | "fahrenheit", // default: celsius
}) => any;

// A function with various complex schemas.
type kitchensink = (_: // params object
{
// STRING
//
// A string
// Examples:
// - "hello"
// - "world"
string?: string,
// A nullable string
string_nullable?: string | null, // default: "the default"
string_enum?: "a" | "b" | "c",
// a oneof
// default: 20
oneof_string_or_number?:
 | string // default: "default_string_in_oneof"
 | number // numbers can happen too
,
}) => any;

} // namespace functions<|end|><|start|>user<|message|>What is the weather like in SF?<|end|><|start|>assistant`,
  );
});

Deno.test("renderHarmony writes nested objects with harmony's quirks (§1.6)", () => {
  const input: PromptInput = {
    messages: [],
    toolChoice: "auto",
    tools: [{
      name: "create_event",
      parameters: {
        type: "object",
        properties: {
          when: {
            type: "object",
            description: "Time window",
            properties: { start: { type: "string" }, minutes: { type: "integer", default: 30 } },
            required: ["start"],
          },
          attendees: {
            type: "array",
            items: { type: "object", properties: { email: { type: "string" } }, required: ["email"] },
          },
          priority: { type: ["integer", "null"] },
          tags: { type: "array" },
          meta: { anyOf: [{ type: "string" }, { type: "number" }] },
        },
        required: ["when"],
      },
    }],
  };
  const developer = text(input).split("<|start|>developer<|message|>")[1]!.split("<|end|>")[0]!;
  assert.equal(
    developer,
    `# Tools

## functions

namespace functions {

type create_event = (_: {
// Time window
when:     // Time window
{
    start: string,
    minutes?: number, // default: 30
    },
attendees?: {
    email: string,
    }[],
priority?: number | null,
tags?: Array<any>,
meta?: any,
}) => any;

} // namespace functions`,
  );
});

Deno.test("renderHarmony without tools or instructions: no calls line, no developer message", () => {
  const input: PromptInput = { messages: [{ role: "user", content: "Hi" }], tools: [], toolChoice: "auto" };
  assert.equal(
    text(input),
    `<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-06-28

Reasoning: medium

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant`,
  );
});

Deno.test("renderHarmony with tool_choice none offers no tools", () => {
  const rendered = text({ ...PROMPT_1_11, toolChoice: "none" });
  assert.ok(!rendered.includes("namespace functions"));
  assert.ok(!rendered.includes("Calls to these tools"));
  assert.ok(rendered.includes("# Instructions\n\nBe brief.<|end|>"));
});

Deno.test("renderHarmony renders a tool loop harmony-style and keeps its reasoning (§1.11 continuation)", () => {
  const input: PromptInput = {
    ...PROMPT_1_11,
    messages: [
      ...PROMPT_1_11.messages,
      {
        role: "assistant",
        content: "",
        reasoning: "Need weather for Tokyo.",
        toolCalls: [{ callId: "call_1", name: "get_weather", arguments: '{"location":"Tokyo"}' }],
      },
      { role: "tool", callId: "call_1", content: '{"temp_c":21}' },
    ],
  };
  const prefix = TEXT_1_11.slice(0, -"<|start|>assistant".length);
  assert.equal(
    text(input),
    prefix +
      '<|start|>assistant<|channel|>analysis<|message|>Need weather for Tokyo.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"location":"Tokyo"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temp_c":21}<|end|><|start|>assistant',
  );
});

Deno.test("renderHarmony drops reasoning of finished turns and ends history finals with <|end|>", () => {
  const input: PromptInput = {
    messages: [
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "4", reasoning: "Add." },
      { role: "user", content: "3+3?" },
    ],
    tools: [],
    toolChoice: "auto",
  };
  const rendered = text(input);
  assert.ok(!rendered.includes("Add."));
  assert.ok(rendered.endsWith(
    "<|start|>user<|message|>2+2?<|end|><|start|>assistant<|channel|>final<|message|>4<|end|><|start|>user<|message|>3+3?<|end|><|start|>assistant",
  ));
});

Deno.test("renderHarmony drops a tool loop's reasoning once the turn produced a final answer", () => {
  const input: PromptInput = {
    messages: [
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: "Checking.",
        reasoning: "Need tool.",
        toolCalls: [{ callId: "c1", name: "get_weather", arguments: "{}" }],
      },
      { role: "tool", callId: "c1", name: "get_weather", content: "sunny" },
      { role: "assistant", content: "Sunny.", reasoning: "Got it." },
    ],
    tools: [GET_WEATHER],
    toolChoice: "auto",
  };
  const rendered = text(input);
  assert.ok(!rendered.includes("Need tool.") && !rendered.includes("Got it."));
  assert.ok(rendered.includes("<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"));
  assert.ok(rendered.includes("<|channel|>final<|message|>Sunny.<|end|><|start|>assistant"));
});

Deno.test("renderHarmony folds leading system/developer messages into the instructions; later ones stay in place", () => {
  const input: PromptInput = {
    instructions: "A.",
    messages: [
      { role: "system", content: "B." },
      { role: "user", content: "Hi" },
      { role: "developer", content: "C." },
    ],
    tools: [],
    toolChoice: "auto",
  };
  const rendered = text(input);
  assert.ok(rendered.includes("<|start|>developer<|message|># Instructions\n\nA.\n\nB.<|end|><|start|>user"));
  assert.ok(rendered.endsWith("<|start|>developer<|message|># Instructions\n\nC.<|end|><|start|>assistant"));
});

Deno.test("renderHarmony keeps control-token look-alikes in user text as text pieces", () => {
  const pieces = renderHarmony(
    { messages: [{ role: "user", content: "<|start|>system" }], tools: [], toolChoice: "auto" },
    { date: null },
  );
  assert.ok(pieces.some((p) => p.kind === "text" && p.text === "<|start|>system"));
  assert.ok(!harmonyPromptText(pieces).includes("Current date"));
});

Deno.test("renderHarmony formats a Date option in UTC", () => {
  const rendered = harmonyPromptText(
    renderHarmony({ messages: [], tools: [], toolChoice: "auto" }, { date: new Date("2026-01-02T23:30:00Z") }),
  );
  assert.ok(rendered.includes("Current date: 2026-01-02\n"));
});

Deno.test("renderHarmony reads the default date from the injected clock at each render", () => {
  let now = new Date("2026-03-04T10:00:00Z");
  const options = { now: () => now };
  const input: PromptInput = { messages: [], tools: [], toolChoice: "auto" };
  assert.ok(harmonyPromptText(renderHarmony(input, options)).includes("Current date: 2026-03-04\n"));
  now = new Date("2027-12-31T23:59:59Z");
  assert.ok(harmonyPromptText(renderHarmony(input, options)).includes("Current date: 2027-12-31\n"));
});
