import type { Logprob } from "../../parsers/logprob.ts";
import assert from "node:assert/strict";
import { HarmonyParser } from "../../parsers/harmony_parser.ts";
import { declaredHostedTools, type HostedTools, NO_HOSTED_TOOLS } from "../../parsers/hosted_tools.ts";
import type { CloseReason, ItemKind, Segment } from "../../parsers/segment.ts";
import { o200kTokenizer } from "../../testing/o200k_tokenizer.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { collectItems, runParser } from "../../testing/collect_items.ts";

const tok = o200kTokenizer();

interface Item {
  readonly item: ItemKind;
  readonly text: string;
  readonly reason: CloseReason;
}

function parse(tokens: readonly number[], toolNames: readonly string[] = []): Segment[] {
  return runParser(new HarmonyParser(tok, { toolNames }), tokens);
}

/** Folds segments into items; `collectItems` checks the open → delta* → close discipline on the way. */
function items(segments: readonly Segment[]): Item[] {
  return collectItems(segments).map(({ item, text, reason }) => ({ item, text, reason: reason! }));
}

function deltas(segments: readonly Segment[]): string[] {
  return segments.flatMap((s) => s.kind === "delta" ? [s.text] : []);
}

const reasoning = (text: string, reason: CloseReason = "end"): Item => ({ item: { type: "reasoning" }, text, reason });
const final = (text: string, reason: CloseReason = "return"): Item => ({
  item: { type: "message", phase: "final_answer" },
  text,
  reason,
});
const preamble = (text: string, reason: CloseReason = "end"): Item => ({
  item: { type: "message", phase: "commentary" },
  text,
  reason,
});
const call = (name: string, text: string, reason: CloseReason = "call"): Item => ({
  item: { type: "function_call", name },
  text,
  reason,
});

interface Vector {
  readonly name: string;
  /** The model output as text; checked against `tokens` so the table cannot drift from harmony.md. */
  readonly text?: string;
  readonly tokens: readonly number[];
  readonly toolNames?: readonly string[];
  readonly expected: readonly Item[];
  readonly deltas?: readonly string[];
}

/**
 * harmony.md V24: a bare recipient after the reasoning and no terminator at EOS. Whether it becomes a function_call
 * or an mcp_call depends only on the request's tool names, so two vectors share these tokens.
 */
const V24_TOKENS: readonly number[] = [
  200005,
  35644,
  200008,
  1844,
  31064,
  25,
  392,
  4827,
  382,
  290,
  11122,
  306,
  40510,
  16842,
  1416,
  1309,
  316,
  1199,
  37342,
  170154,
  4584,
  13,
  200002,
  200006,
  173781,
  316,
  28,
  29712,
  170154,
  200005,
  35644,
  3490,
  200008,
  10848,
  7693,
  1243,
  392,
  173844,
  18583,
];

const VECTORS: readonly Vector[] = [
  {
    name: "V1 reasoning then final",
    text:
      '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>',
    tokens: [
      200005,
      35644,
      200008,
      1844,
      31064,
      25,
      392,
      4827,
      382,
      220,
      17,
      659,
      220,
      17,
      16842,
      12295,
      81645,
      13,
      51441,
      6052,
      13,
      200007,
      200006,
      173781,
      200005,
      17196,
      200008,
      17,
      659,
      220,
      17,
      314,
      220,
      19,
      13,
      200002,
    ],
    expected: [reasoning('User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.'), final("2 + 2 = 4.")],
  },
  {
    name: "V1 short trace: per-token deltas",
    text: "<|channel|>analysis<|message|>Hi.<|end|><|start|>assistant<|channel|>final<|message|>I 💖 it<|return|>",
    tokens: [
      200005,
      35644,
      200008,
      12194,
      13,
      200007,
      200006,
      173781,
      200005,
      17196,
      200008,
      40,
      74580,
      244,
      480,
      200002,
    ],
    expected: [reasoning("Hi."), final("I 💖 it")],
    // harmony itself emits " " and "💖" apart; rill holds a token's text until its last character is complete, so
    // every delta is the text of whole tokens (and carries exactly their logprobs).
    deltas: ["Hi", ".", "I", " 💖", " it"],
  },
  {
    name: "V2 reasoning then a function call, channel first, <|constrain|>json",
    text:
      '<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"San Francisco"}<|call|>',
    tokens: [
      200005,
      35644,
      200008,
      23483,
      316,
      1199,
      1114,
      717,
      170154,
      13,
      200007,
      200006,
      173781,
      200005,
      12606,
      815,
      316,
      28,
      44580,
      775,
      170154,
      220,
      200003,
      4108,
      200008,
      10848,
      7693,
      7534,
      28499,
      18826,
      18583,
      200012,
    ],
    expected: [reasoning("Need to use function get_weather."), call("get_weather", '{"location":"San Francisco"}')],
  },
  {
    name: "V3 recipient before channel",
    text:
      '<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"location":"Tokyo"}<|call|>',
    tokens: [
      200005,
      35644,
      200008,
      23483,
      11122,
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
    ],
    expected: [reasoning("Need weather."), call("get_weather", '{"location":"Tokyo"}')],
  },
  {
    name: "V3b recipient in role position as the very first output",
    text: ' to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"location":"Tokyo"}<|call|>',
    tokens: [
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
    ],
    expected: [call("get_weather", '{"location":"Tokyo"}')],
  },
  {
    name: "V4 two tool calls back to back",
    text:
      '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Paris"}<|call|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"London"}<|call|>',
    tokens: [
      200005,
      12606,
      815,
      316,
      28,
      44580,
      775,
      170154,
      220,
      200003,
      4108,
      200008,
      10848,
      7693,
      7534,
      72782,
      18583,
      200012,
      200006,
      173781,
      200005,
      12606,
      815,
      316,
      28,
      44580,
      775,
      170154,
      220,
      200003,
      4108,
      200008,
      10848,
      7693,
      7534,
      51162,
      18583,
      200012,
    ],
    expected: [call("get_weather", '{"location":"Paris"}'), call("get_weather", '{"location":"London"}')],
    deltas: ['{"', "location", '":"', "Paris", '"}', '{"', "location", '":"', "London", '"}'],
  },
  {
    name: "V5 preamble on commentary, then a call",
    text:
      '<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant<|channel|>commentary<|message|>I will check the weather now.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Oslo"}<|call|>',
    tokens: [
      200005,
      35644,
      200008,
      15274,
      13,
      200007,
      200006,
      173781,
      200005,
      12606,
      815,
      200008,
      40,
      738,
      2371,
      290,
      11122,
      1954,
      13,
      200007,
      200006,
      173781,
      200005,
      12606,
      815,
      316,
      28,
      44580,
      775,
      170154,
      220,
      200003,
      4108,
      200008,
      10848,
      7693,
      7534,
      15097,
      746,
      18583,
      200012,
    ],
    expected: [
      reasoning("Plan."),
      preamble("I will check the weather now."),
      call("get_weather", '{"location":"Oslo"}'),
    ],
  },
  {
    name: "V6 browser.search on analysis with code content type",
    text:
      '<|channel|>analysis<|message|>Need browse.<|end|><|start|>assistant<|channel|>analysis to=browser.search code<|message|>{"query":"gpt-oss release","topn":5}<|call|>',
    tokens: [
      200005,
      35644,
      200008,
      23483,
      28248,
      13,
      200007,
      200006,
      173781,
      200005,
      35644,
      316,
      28,
      46071,
      16718,
      3490,
      200008,
      10848,
      2975,
      7534,
      70,
      555,
      12,
      2907,
      8232,
      4294,
      8169,
      77,
      1243,
      20,
      92,
      200012,
    ],
    expected: [
      reasoning("Need browse."),
      {
        item: { type: "web_search_call", action: "search" },
        text: '{"query":"gpt-oss release","topn":5}',
        reason: "call",
      },
    ],
  },
  {
    name: "V7 python",
    text: "<|channel|>analysis to=python code<|message|>print(2+2)<|call|>",
    tokens: [200005, 35644, 316, 28, 29010, 3490, 200008, 1598, 7, 17, 10, 17, 8, 200012],
    expected: [{ item: { type: "code_interpreter_call" }, text: "print(2+2)", reason: "call" }],
  },
  {
    name: "V8 json content type without <|constrain|>",
    text: '<|channel|>commentary to=functions.get_weather json<|message|>{"location":"Rome"}<|call|>',
    tokens: [200005, 12606, 815, 316, 28, 44580, 775, 170154, 5701, 200008, 10848, 7693, 7534, 158985, 18583, 200012],
    expected: [call("get_weather", '{"location":"Rome"}')],
  },
  {
    name: "V9 empty analysis still opens and closes a reasoning item",
    text: "<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>",
    tokens: [200005, 35644, 200008, 200007, 200006, 173781, 200005, 17196, 200008, 12194, 200002],
    expected: [reasoning(""), final("Hi")],
  },
  {
    name: "V10 final json is a content type, not a recipient",
    text: '<|channel|>final json<|message|>{"a":1}<|return|>',
    tokens: [200005, 17196, 5701, 200008, 10848, 64, 1243, 16, 92, 200002],
    expected: [final('{"a":1}')],
  },
  {
    name: "V11 final <|constrain|>json is a content type, not a recipient",
    text: '<|channel|>final <|constrain|>json<|message|>{"a":1}<|return|>',
    tokens: [200005, 17196, 220, 200003, 4108, 200008, 10848, 64, 1243, 16, 92, 200002],
    expected: [final('{"a":1}')],
  },
  {
    name: "V12 a tool-authored header degrades to a visible commentary message",
    text: '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny": true}<|end|>',
    tokens: [
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
      41133,
      3008,
      1243,
      1343,
      92,
      200007,
    ],
    expected: [preamble('{"sunny": true}')],
  },
  {
    name: "V13 duplicated to= gives one call",
    text: "<|channel|>commentary to=functions.get_weather to=functions.get_weather<|message|>{}<|call|>",
    tokens: [200005, 12606, 815, 316, 28, 44580, 775, 170154, 316, 28, 44580, 775, 170154, 200008, 12083, 200012],
    expected: [call("get_weather", "{}")],
  },
  {
    name: "V14 extra stop token after a message is ignored",
    text: "<|channel|>final<|message|>Hi<|end|><|return|>",
    tokens: [200005, 17196, 200008, 12194, 200007, 200002],
    expected: [final("Hi", "end")],
  },
  {
    name: "V15 a bare channel word after a stop token is header noise",
    text: "<|channel|>final<|message|>Hi<|end|>commentary",
    tokens: [200005, 17196, 200008, 12194, 200007, 12606, 815],
    expected: [final("Hi", "end")],
  },
  {
    name: "V23 role word without <|start|> opens an implicit header",
    text: "<|channel|>analysis<|message|>x<|end|>assistant<|channel|>final<|message|>y<|return|>",
    tokens: [200005, 35644, 200008, 87, 200007, 173781, 200005, 17196, 200008, 88, 200002],
    expected: [reasoning("x"), final("y")],
  },
  {
    name: "V16 missing <|message|> recovers the body",
    text: "<|channel|>commentary Hello<|end|>",
    tokens: [200005, 12606, 815, 32949, 200007],
    expected: [preamble("Hello")],
  },
  {
    name: "V16 missing <|message|> in a later message is recovered too (harmony drops it)",
    text: "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final Hello<|return|>",
    tokens: [200005, 35644, 200008, 64, 200007, 200006, 173781, 200005, 17196, 32949, 200002],
    expected: [reasoning("a"), final("Hello")],
  },
  {
    name: "V17 truncated mid-message closes implicitly at flush",
    text: "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>The answer is",
    tokens: [200005, 35644, 200008, 42421, 13, 200007, 200006, 173781, 200005, 17196, 200008, 976, 6052, 382],
    expected: [reasoning("Think."), final("The answer is", "implicit")],
  },
  {
    name: "V18 truncated in a header emits nothing for that message",
    text: "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>fin",
    tokens: [200005, 35644, 200008, 42421, 13, 200007, 200006, 173781, 200005, 6994],
    expected: [reasoning("Think.")],
  },
  {
    name: "V24 missing terminator at EOS, bare recipient unknown to the request → a plain message",
    text:
      '<|channel|>analysis<|message|>User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.<|return|><|start|>assistant to=lookup_weather<|channel|>analysis code<|message|>{"location": "Tokyo"}',
    tokens: V24_TOKENS,
    toolNames: [],
    expected: [
      reasoning('User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.', "return"),
      {
        item: { type: "message" },
        text: '{"location": "Tokyo"}',
        reason: "implicit",
      },
    ],
  },
  {
    name: "V24 bare recipient that is a requested tool → function_call",
    tokens: V24_TOKENS,
    toolNames: ["lookup_weather"],
    expected: [
      reasoning('User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.', "return"),
      call("lookup_weather", '{"location": "Tokyo"}', "implicit"),
    ],
  },
  {
    name: "V24 Rust inline variant: <|end|>, channel before a bare recipient",
    tokens: [
      200005,
      35644,
      200008,
      1844,
      31064,
      25,
      392,
      4827,
      382,
      290,
      11122,
      306,
      40510,
      16842,
      1416,
      1309,
      316,
      1199,
      37342,
      170154,
      4584,
      13,
      200007,
      200006,
      173781,
      200005,
      35644,
      316,
      28,
      29712,
      170154,
      3490,
      200008,
      10848,
      7693,
      1243,
      392,
      173844,
      18583,
    ],
    toolNames: ["lookup_weather"],
    expected: [
      reasoning('User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.'),
      call("lookup_weather", '{"location": "Tokyo"}', "implicit"),
    ],
  },
  {
    name: "V19 Unicode split across tokens",
    text: "<|channel|>final<|message|>I 💖 it<|return|>",
    tokens: [200005, 17196, 200008, 40, 74580, 244, 480, 200002],
    expected: [final("I 💖 it")],
    deltas: ["I", " 💖", " it"],
  },
  {
    name: "V19 invalid UTF-8 becomes U+FFFD per maximal subpart",
    tokens: [
      ...tok.encode("<|start|>assistant<|message|>"),
      9552,
      9552,
      ...tok.encode("worked<|end|>"),
    ],
    expected: [{ item: { type: "message" }, text: " \uFFFD \uFFFDworked", reason: "end" }],
  },
  {
    name: "V20 <|constrain|> right after the recipient, channel first",
    text: '<|start|>assistant<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{"x":1}<|call|>',
    tokens: [
      200006,
      173781,
      200005,
      12606,
      815,
      316,
      28,
      44580,
      775,
      170154,
      200003,
      4108,
      200008,
      10848,
      87,
      1243,
      16,
      92,
      200012,
    ],
    expected: [call("get_weather", '{"x":1}')],
  },
  {
    name: "V21 tool name with a hyphen and extra dots keeps everything after functions.",
    text: "<|channel|>commentary to=functions.web-browsing.v2 <|constrain|>json<|message|>{}<|call|>",
    tokens: [
      200005,
      12606,
      815,
      316,
      28,
      44580,
      8646,
      2118,
      2668,
      289,
      5520,
      17,
      220,
      200003,
      4108,
      200008,
      12083,
      200012,
    ],
    expected: [call("web-browsing.v2", "{}")],
  },
  {
    name: "V22 bare function name known to the request",
    text: "<|channel|>commentary to=get_weather <|constrain|>json<|message|>{}<|call|>",
    tokens: [200005, 12606, 815, 316, 49687, 170154, 220, 200003, 4108, 200008, 12083, 200012],
    toolNames: ["get_weather"],
    expected: [call("get_weather", "{}")],
  },
  {
    name: "V22 bare function name unknown to the request → a plain message",
    tokens: [200005, 12606, 815, 316, 49687, 170154, 220, 200003, 4108, 200008, 12083, 200012],
    toolNames: [],
    expected: [{
      item: { type: "message" },
      text: "{}",
      reason: "call",
    }],
  },
  {
    name: "model repeats <|start|>assistant after the prefill",
    text: "<|start|>assistant<|channel|>final<|message|>Hi<|return|>",
    tokens: [200006, 173781, 200005, 17196, 200008, 12194, 200002],
    expected: [final("Hi")],
  },
  {
    name: "<|start|> inside content ends the message implicitly",
    text: "<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>Hi<|return|>",
    tokens: [200005, 35644, 200008, 49631, 200006, 173781, 200005, 17196, 200008, 12194, 200002],
    expected: [reasoning("think", "implicit"), final("Hi")],
  },
  {
    name: "<|start|> without a role defaults to assistant",
    text: "<|channel|>analysis<|message|>a<|end|><|start|><|channel|>final<|message|>b<|return|>",
    tokens: [200005, 35644, 200008, 64, 200007, 200006, 200005, 17196, 200008, 65, 200002],
    expected: [reasoning("a"), final("b")],
  },
  {
    name: "<|endoftext|> in content is end of generation, not text",
    text: "<|channel|>final<|message|>Hi<|endoftext|>",
    tokens: [200005, 17196, 200008, 12194, 199999],
    expected: [final("Hi", "implicit")],
  },
  {
    name: "other recipients become mcp_call with the first segment as server label",
    text: "<|channel|>commentary to=repo_browser.list_files json<|message|>{}<|call|>",
    tokens: tok.encode("<|channel|>commentary to=repo_browser.list_files json<|message|>{}<|call|>"),
    expected: [{
      item: { type: "mcp_call", serverLabel: "repo_browser", name: "list_files" },
      text: "{}",
      reason: "call",
    }],
  },
  {
    name: "a call on the analysis channel is still a function call",
    tokens: tok.encode("<|channel|>analysis to=functions.ffgrep code<|message|>{}<|call|>"),
    expected: [call("ffgrep", "{}")],
  },
  {
    name: "an unknown channel degrades to a visible message",
    tokens: tok.encode("<|channel|>finalx<|message|>Hello<|return|>"),
    expected: [{ item: { type: "message" }, text: "Hello", reason: "return" }],
  },
  {
    name: "a missing <|message|> on a call recovers the arguments",
    tokens: tok.encode('<|channel|>commentary to=functions.get_weather {"city":"Oslo"}<|call|>'),
    expected: [call("get_weather", '{"city":"Oslo"}')],
  },
  {
    name: "a call to a function the request did not offer degrades to a plain message",
    tokens: tok.encode(
      '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>',
    ),
    toolNames: ["weather.get"],
    expected: [{ item: { type: "message" }, text: '{"city":"Oslo"}', reason: "call" }],
  },
  {
    name: "output that never reaches <|message|> after a non-channel word degrades to text",
    tokens: tok.encode("<|channel|>analysis000000000000"),
    expected: [{ item: { type: "message" }, text: "analysis000000000000", reason: "implicit" }],
  },
  {
    name: "the same, ended by a terminator",
    tokens: tok.encode("<|channel|>analysis000 more<|end|>"),
    expected: [{ item: { type: "message" }, text: "analysis000 more", reason: "end" }],
  },
  {
    name: "control tokens inside content are stripped, never shown as text",
    tokens: tok.encode(
      "<|channel|>final<|message|>a<|channel|>b<|constrain|>c<|message|>d<|reserved_200013|>e<|return|>",
    ),
    expected: [final("abcde")],
  },
  {
    name: "an empty generation emits nothing",
    tokens: [],
    expected: [],
  },
];

/** The function tools a vector's request offers unless it names its own: every function the vectors call. */
const OFFERED = ["get_weather", "ffgrep", "web-browsing.v2"];

for (const v of VECTORS) {
  Deno.test(`HarmonyParser: ${v.name}`, () => {
    if (v.text !== undefined) assert.equal(tok.decode(v.tokens), v.text);
    const segments = parse(v.tokens, v.toolNames ?? OFFERED);
    assert.deepEqual(items(segments), v.expected);
    if (v.deltas !== undefined) assert.deepEqual(deltas(segments), v.deltas);
  });
}

Deno.test("HarmonyParser: inReasoning is true exactly while an analysis message is open", () => {
  const parser = new HarmonyParser(tok, { toolNames: [] });
  const trace = [200005, 35644, 200008, 12194, 13, 200007, 200006, 173781, 200005, 17196, 200008, 12194, 200002].map(
    (t) => {
      parser.push(t);
      return parser.inReasoning;
    },
  );
  assert.deepEqual(trace, [false, false, true, true, true, false, false, false, false, false, false, false, false]);
});

Deno.test("HarmonyParser: a delta is the text of whole tokens and carries exactly their logprobs", () => {
  const lp = (token: string, logprob: number): Logprob => ({ token, bytes: [], logprob, top_logprobs: [] });
  const parser = new HarmonyParser(tok, { toolNames: [] });
  const script: [number, Logprob][] = [
    [200005, lp("<|channel|>", -0.1)],
    [17196, lp("final", -0.2)],
    [200008, lp("<|message|>", -0.3)],
    [40, lp("I", -1)],
    [74580, lp(" \xf0\x9f\x92", -2)],
    [244, lp("\x96", -3)],
    [200002, lp("<|return|>", -4)],
  ];
  const out = runParser(parser, script.map(([t]) => t), script.map(([, l]) => l));
  const withLogprobs = out.flatMap((s) => s.kind === "delta" ? [[s.text, s.logprobs?.map((l) => l.logprob)]] : []);
  assert.deepEqual(withLogprobs, [["I", [-1]], [" 💖", [-2, -3]]]);
});

Deno.test("HarmonyParser: a character cut off at the message end leaves with the token that began it", () => {
  const lp = (logprob: number): Logprob => ({ token: "", bytes: [], logprob, top_logprobs: [] });
  const parser = new HarmonyParser(tok, { toolNames: [] });
  // 9552 = 20 F0 9F: a space and half an emoji; `<|constrain|>` inside content ends the bytes, then `<|end|>`.
  const tokens = [200005, 17196, 200008, 12194, 9552, 200003, 9552];
  const out = runParser(parser, tokens, tokens.map((_, i) => lp(-i)));
  const withLogprobs = out.flatMap((s) => s.kind === "delta" ? [[s.text, s.logprobs?.map((l) => l.logprob)]] : []);
  assert.deepEqual(withLogprobs, [["Hi", [-3]], [" \uFFFD", [-4]], [" \uFFFD", [-6]]]);
});

Deno.test("HarmonyParser: a dangling partial character at EOS becomes U+FFFD, never lost", () => {
  const segments = parse([200005, 17196, 200008, 12194, 31446]);
  assert.deepEqual(items(segments), [final("Hi\uFFFD", "implicit")]);
});

Deno.test("HarmonyParser: special tokens are looked up by text, not by id", () => {
  // A tokenizer whose specials sit at other ids: the parser must follow the table.
  const remap = new Map([[200005, 1], [200008, 2], [200002, 3]]);
  const back = new Map([...remap].map(([a, b]) => [b, a]));
  const shifted = {
    ...tok,
    vocabSize: tok.vocabSize,
    encode: (t: string) => tok.encode(t).map((id) => remap.get(id) ?? id),
    encodeOrdinary: (t: string) => tok.encodeOrdinary(t),
    decode: (ids: readonly number[]) => tok.decode(ids.map((id) => back.get(id) ?? id)),
    tokenBytes: (id: number) => tok.tokenBytes(back.get(id) ?? id),
    specialId: (t: string) => {
      const id = tok.specialId(t);
      return id === undefined ? undefined : remap.get(id) ?? id;
    },
    isSpecial: (id: number) => back.has(id) || tok.isSpecial(id),
  };
  const parser = new HarmonyParser(shifted, { toolNames: [] });
  assert.deepEqual(items(runParser(parser, [1, 17196, 2, 12194, 3])), [final("Hi")]);
});

Deno.test("HarmonyParser works over the byte-level toy tokenizer (no o200k assumptions)", () => {
  const toy = new ToyTokenizer();
  const parser = new HarmonyParser(toy, { toolNames: ["get_weather"] });
  const script = toy.encode(
    '<|channel|>analysis<|message|>Think é€😀<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
  );
  assert.deepEqual(items(runParser(parser, script)), [
    reasoning("Think é€😀"),
    call("get_weather", '{"city":"Paris"}'),
  ]);
});

Deno.test("HarmonyParser: a recovered body's logprob tokens concatenate to its text", () => {
  const utf8 = new TextEncoder();
  const ids = tok.encode("<|channel|>commentary Hello there<|end|>");
  const lps = ids.map((id): Logprob => {
    const text = tok.decode([id]);
    return { token: text, bytes: [...utf8.encode(text)], logprob: -1, top_logprobs: [] };
  });
  // The body starts inside a token (" Hello" also holds the space that ended the channel word).
  assert.ok(lps.some((l) => l.token === " Hello"));
  const [item] = collectItems(runParser(new HarmonyParser(tok, { toolNames: [] }), ids, lps));
  assert.equal(item?.text, "Hello there");
  assert.equal(item?.logprobs.map((l) => l.token).join(""), "Hello there");
  assert.deepEqual(item?.logprobs.flatMap((l) => l.bytes), [...utf8.encode("Hello there")]);
});

Deno.test("hosted calls count only when the request declared that kind of tool; otherwise they are plain text", () => {
  const cases = [
    ["<|channel|>commentary to=repo_browser.list_files json<|message|>{}<|call|>", "mcp_call"],
    ['<|channel|>analysis to=browser.search code<|message|>{"query":"x"}<|call|>', "web_search_call"],
    ["<|channel|>analysis to=python code<|message|>print(1)<|call|>", "code_interpreter_call"],
  ] as const;
  const kinds = (text: string, hostedTools: HostedTools) =>
    items(runParser(new HarmonyParser(tok, { toolNames: [], hostedTools }), tok.encode(text))).map((i) => i.item.type);
  for (const [text, kind] of cases) {
    assert.deepEqual(kinds(text, NO_HOSTED_TOOLS), ["message"], text);
    assert.deepEqual(
      kinds(text, { webSearch: true, codeInterpreter: true, mcpServers: new Set(["repo_browser"]) }),
      [kind],
      text,
    );
  }
  // An MCP call is counted for its own server only.
  assert.deepEqual(
    kinds(cases[0][0], { webSearch: true, codeInterpreter: true, mcpServers: new Set(["other"]) }),
    ["message"],
  );
  // The message keeps the body the model wrote.
  const text = items(
    runParser(new HarmonyParser(tok, { toolNames: [], hostedTools: NO_HOSTED_TOOLS }), tok.encode(cases[0][0])),
  );
  assert.equal(text[0]?.text, "{}");
});

Deno.test("declaredHostedTools reads web_search*, code_interpreter and mcp server labels from a request's tools", () => {
  const hosted = declaredHostedTools([
    { type: "function", name: "f" },
    { type: "web_search_preview" },
    { type: "mcp", server_label: "deepwiki", server_url: "https://x" },
    { type: "mcp" },
    null,
    "junk",
  ]);
  assert.deepEqual(hosted, { webSearch: true, codeInterpreter: false, mcpServers: new Set(["deepwiki"]) });
  assert.deepEqual(declaredHostedTools([{ type: "code_interpreter" }]).codeInterpreter, true);
});
