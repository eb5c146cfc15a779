/**
 * The official `openai` SDK consumes rill's SSE bytes: its stream helper runs the validating accumulator over every
 * event (it throws on ordering, index and identity violations), and its final response must equal rill's
 * non-streaming result for the same tokens.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { CounterIds } from "../../events/ids.ts";
import { collectResponse, type PipelineOptions, responseEventStream, sseEncoder } from "../../events/pipeline.ts";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { HarmonyParser } from "../../parsers/harmony_parser.ts";
import type { OutputParser } from "../../parsers/segment.ts";
import { type Chunking, fakeLogprobs, type ReplayOptions, replayTokens } from "../../testing/scripted_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { clock, toolTemplate as template } from "../../testing/response_fixtures.ts";
import { validateSSE } from "../../conformance/validator.ts";
import { PlainTextParser } from "../../testing/plain_text_parser.ts";

const tok = new ToyTokenizer();

function options(parser: OutputParser, includeLogprobs = false): PipelineOptions {
  return { template, tokenizer: tok, parser, ids: new CounterIds(), clock, includeLogprobs };
}

function sdkFor(body: ReadableStream<Uint8Array>): OpenAI {
  return new OpenAI({
    baseURL: "http://rill.test/v1",
    apiKey: "x",
    fetch: () => Promise.resolve(new Response(body, { headers: { "content-type": "text/event-stream" } })),
  });
}

/** Drops what the SDK adds on its side (`output_text`, `output_parsed`, `parsed`, `parsed_arguments`), so the rest must match rill's object exactly. */
function withoutSdkExtras(value: unknown): unknown {
  const copy = JSON.parse(JSON.stringify(value));
  delete copy.output_text;
  delete copy.output_parsed;
  for (const item of copy.output ?? []) {
    delete item.parsed_arguments;
    for (const part of item.content ?? []) delete part.parsed;
  }
  return copy;
}

interface Case {
  readonly name: string;
  readonly text: string;
  readonly parser: () => OutputParser;
  readonly replay?: ReplayOptions;
  /** include: ["message.output_text.logprobs"], with fake engine logprobs for every token. */
  readonly logprobs?: boolean;
  /** The output item types the tokens must produce (so a case cannot pass by producing less). */
  readonly items?: readonly string[];
}

const harmony = () => new HarmonyParser(tok, { toolNames: ["get_weather"] });

const cases: Case[] = [
  { name: "plain text", text: "Hello world, caf\u00e9 \u20ac 😀", parser: () => new PlainTextParser(tok) },
  {
    name: "harmony reasoning then final answer",
    text: "<|channel|>analysis<|message|>User greets. Reply.<|end|>" +
      "<|start|>assistant<|channel|>final<|message|>Hello world!<|return|>",
    parser: harmony,
  },
  {
    name: "harmony reasoning then function call",
    text: "<|channel|>analysis<|message|>Need weather.<|end|>" +
      '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}' +
      "<|call|>",
    parser: harmony,
  },
  {
    name: "harmony cut by max_output_tokens",
    text: "<|channel|>analysis<|message|>Thinking about the weath",
    parser: harmony,
    replay: { finish: "length" },
  },
  {
    name: "harmony preamble, web search, python and an MCP call (every hosted item type)",
    text: "<|channel|>commentary<|message|>Let me look.<|end|>" +
      '<|start|>assistant<|channel|>analysis to=browser.search code<|message|>{"query":"Paris"}<|call|>' +
      "<|start|>assistant<|channel|>analysis to=python code<|message|>print(1)<|call|>" +
      '<|start|>assistant<|channel|>commentary to=repo.list <|constrain|>json<|message|>{"q":"x"}<|call|>' +
      "<|start|>assistant<|channel|>final<|message|>Done.<|return|>",
    parser: harmony,
    items: ["message", "web_search_call", "code_interpreter_call", "mcp_call", "message"],
  },
  {
    name: "ChatML reasoning, text, two calls, text again",
    text:
      '<think>\nweather\n</think>\n\nChecking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}' +
      '\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>Bye é€😀<|im_end|>',
    parser: () => new ChatmlParser(tok, { toolNames: ["get_weather"] }),
    items: ["reasoning", "message", "function_call", "function_call", "message"],
  },
  {
    name: "harmony with logprobs, including text recovered from a header without <|message|>",
    text:
      "<|channel|>final<|message|>Hello world \u00e9\u20ac<|end|><|start|>assistant<|channel|>final Paris<|return|>",
    parser: harmony,
    logprobs: true,
    items: ["message", "message"],
  },
];

const chunkings: Chunking[] = ["one", { seed: 11 }, "all"];

for (const c of cases) {
  Deno.test(`openai SDK stream helper accepts rill's SSE: ${c.name}`, async () => {
    const tokens = tok.encode(c.text);
    const lp = c.logprobs === true;
    const replay: ReplayOptions = lp
      ? { ...c.replay, logprobs: fakeLogprobs(tokens, 2, tok.vocabSize) }
      : { ...c.replay };
    const { response } = await collectResponse(replayTokens(tokens, "one", replay), options(c.parser(), lp));
    if (c.items !== undefined) assert.deepEqual(response.output.map((i) => i.type), c.items);
    for (const chunking of chunkings) {
      const body = await new Response(
        responseEventStream(replayTokens(tokens, chunking, replay), options(c.parser(), lp)).pipeThrough(sseEncoder()),
      ).text();
      assert.deepEqual(validateSSE(body, { logprobs: lp }).violations, [], JSON.stringify(chunking));
      const stream = sdkFor(new Response(body).body!).responses.stream({ model: "rill-test", input: "hi" });
      const seen: string[] = [];
      for await (const event of stream) seen.push(event.type);
      const final = await stream.finalResponse();
      assert.ok(seen.length > 3, JSON.stringify(chunking));
      assert.deepEqual(withoutSdkExtras(final), withoutSdkExtras(response), JSON.stringify(chunking));
    }
  });
}

Deno.test("openai SDK surfaces a failed stream as an error carrying rill's message", async () => {
  const tokens = tok.encode("Hello");
  const body = responseEventStream(
    replayTokens(tokens, "one", { finish: "error", message: "backend died" }),
    options(new PlainTextParser(tok)),
  ).pipeThrough(sseEncoder());
  const stream = sdkFor(body).responses.stream({ model: "rill-test", input: "hi" });
  await assert.rejects(async () => {
    for await (const _ of stream) { /* drain */ }
  }, (e: unknown) => e instanceof Error && e.message.includes("backend died"));
});
