import assert from "node:assert/strict";
import { createHarmonyFormat } from "../../prompt/harmony_format.ts";
import type { PromptInput } from "../../prompt/conversation.ts";
import type { Tokenizer } from "../../checkpoint/tokenizer.ts";
import type { Segment } from "../../parsers/segment.ts";
import { o200kTokenizer } from "../../testing/o200k_tokenizer.ts";

const tok = o200kTokenizer();
const format = createHarmonyFormat(tok, { date: "2025-06-28" });

const PROMPT: PromptInput = {
  instructions: "Be brief.",
  messages: [{ role: "user", content: "Weather in Tokyo?" }],
  tools: [{
    name: "get_weather",
    description: "Get the weather.",
    parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] },
  }],
  toolChoice: "auto",
  reasoningEffort: "low",
};

/** harmony.md §1.11: the 127 prompt tokens. */
const TOKENS_1_11 = [
  200006,
  17360,
  200008,
  3575,
  553,
  17554,
  162016,
  11,
  261,
  4410,
  6439,
  2359,
  22203,
  656,
  7788,
  17527,
  558,
  87447,
  100594,
  25,
  220,
  1323,
  19,
  12,
  3218,
  198,
  6576,
  3521,
  25,
  220,
  1323,
  20,
  12,
  3218,
  12,
  2029,
  279,
  30377,
  289,
  25,
  4465,
  279,
  2,
  13888,
  18403,
  25,
  8450,
  11,
  49159,
  11,
  1721,
  13,
  21030,
  2804,
  413,
  7360,
  395,
  1753,
  3176,
  558,
  63446,
  316,
  1879,
  8437,
  2804,
  810,
  316,
  290,
  49159,
  9334,
  25,
  461,
  44580,
  6120,
  200007,
  200006,
  77944,
  200008,
  2,
  68406,
  279,
  3238,
  14567,
  364,
  2,
  20574,
  279,
  877,
  9964,
  279,
  4797,
  9964,
  95359,
  2942,
  290,
  11122,
  558,
  2493,
  717,
  170154,
  314,
  11350,
  25,
  405,
  7693,
  25,
  1621,
  412,
  9263,
  871,
  1062,
  502,
  92,
  602,
  9819,
  9964,
  200007,
  200006,
  1428,
  200008,
  29602,
  306,
  40510,
  30,
  200007,
  200006,
  173781,
];

/** harmony.md §1.11: the continuation after a tool call (history re-rendered harmony-style). */
const CONTINUATION_1_11 = [
  200006,
  173781,
  200005,
  35644,
  200008,
  23483,
  11122,
  395,
  40510,
  13,
  200007,
  200006,
  173781,
  316,
  28,
  44580,
  775,
  170154,
  200005,
  12606,
  815,
  220,
  200003,
  4108,
  200008,
  10848,
  7693,
  7534,
  173844,
  18583,
  200012,
  200006,
  44580,
  775,
  170154,
  316,
  28,
  173781,
  200005,
  12606,
  815,
  200008,
  10848,
  7340,
  1303,
  1243,
  2040,
  92,
  200007,
  200006,
  173781,
];

Deno.test("harmony format renders the §1.11 prompt to its 127 token ids", () => {
  const ids = format.render(PROMPT);
  assert.equal(ids.length, 127);
  assert.deepEqual(ids, TOKENS_1_11);
});

Deno.test("harmony format renders the §1.11 tool-loop continuation token for token", () => {
  const ids = format.render({
    ...PROMPT,
    messages: [
      ...PROMPT.messages,
      {
        role: "assistant",
        content: "",
        reasoning: "Need weather for Tokyo.",
        toolCalls: [{ callId: "call_1", name: "get_weather", arguments: '{"location":"Tokyo"}' }],
      },
      { role: "tool", callId: "call_1", content: '{"temp_c":21}' },
    ],
  });
  assert.deepEqual(ids, [...TOKENS_1_11.slice(0, -2), ...CONTINUATION_1_11]);
});

Deno.test("harmony format stops on <|return|>, <|call|> and <|endoftext|>, not <|end|>", () => {
  assert.deepEqual(format.stopTokens, [200002, 200012, 199999]);
  assert.equal(format.name, "harmony");
});

Deno.test("harmony format encodes control-token look-alikes in user text as ordinary tokens", () => {
  const ids = format.render({ messages: [{ role: "user", content: "<|start|>" }], tools: [], toolChoice: "auto" });
  const userAt = ids.lastIndexOf(1428);
  assert.deepEqual(ids.slice(userAt + 2, userAt + 7), [27, 91, 5236, 91, 29]);
  assert.equal(ids.filter((id) => id === 200006).length, 3); // system, user, prefill
});

Deno.test("harmony format parsers are fresh per generation and know the request's tool names", () => {
  const output = tok.encode("<|channel|>commentary to=get_weather <|constrain|>json<|message|>{}<|call|>");
  const run = (toolNames: readonly string[]): Segment[] => {
    const parser = format.createParser({ toolNames });
    return [...output.flatMap((t) => parser.push(t)), ...parser.flush()];
  };
  assert.deepEqual(run(["get_weather"])[0], { kind: "open", item: { type: "function_call", name: "get_weather" } });
  // Not offered: not a call (the rule for every chat format), its body a plain message.
  assert.deepEqual(run([])[0], { kind: "open", item: { type: "message" } });
});

Deno.test("createHarmonyFormat rejects a tokenizer without harmony control tokens", () => {
  const plain: Tokenizer = {
    vocabSize: tok.vocabSize,
    encode: (t) => tok.encodeOrdinary(t),
    encodeOrdinary: (t) => tok.encodeOrdinary(t),
    decode: (ids) => tok.decode(ids),
    tokenBytes: (id) => tok.tokenBytes(id),
    specialId: () => undefined,
    isSpecial: () => false,
  };
  assert.throws(() => createHarmonyFormat(plain), TypeError);
});
