/**
 * The class of bug in seeds 000 and 002: the same model output, grouped into engine steps differently (1 token per
 * step, random 1–8, everything at once), must give the same items, texts and tool calls, and every stream must be
 * well-formed. Scripts are random well-formed and malformed harmony and ChatML outputs, through the real parsers.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import type { FinishReason } from "../../engine/engine.ts";
import { CounterIds } from "../../events/ids.ts";
import { collectResponse } from "../../events/pipeline.ts";
import type { Response } from "../../events/types.ts";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { HarmonyParser } from "../../parsers/harmony_parser.ts";
import type { OutputParser } from "../../parsers/segment.ts";
import { type Chunking, fakeLogprobs, replayTokens } from "../../testing/scripted_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { clock, toolTemplate as template } from "../../testing/response_fixtures.ts";
import { modDeltaBoundaries, structuralProblems } from "../../testing/stream_checks.ts";
import { validateStream } from "../../conformance/validator.ts";
import { SseEncoder } from "../../events/sse_encoder.ts";

const tok = new ToyTokenizer();
const RUNS = 100;

const body = fc.array(
  fc.constantFrom("Hello", " world", "\u00e9", "\u20ac", "😀", " the", "a", "b", " ", "\n", "1", ",", "ing"),
  { maxLength: 10 },
).map((parts) => parts.join(""));

const harmonyMessage = fc.tuple(
  fc.constantFrom("analysis", "final", "preamble", "call", "browser", "python", "mcp"),
  body,
  fc.constantFrom("<|end|>", "<|return|>", "<|call|>", ""),
).map(([kind, text, term]) => {
  switch (kind) {
    case "analysis":
      return `<|channel|>analysis<|message|>${text}${term || "<|end|>"}`;
    case "final":
      return `<|channel|>final<|message|>${text}<|return|>`;
    case "preamble":
      return `<|channel|>commentary<|message|>${text}<|end|>`;
    case "call":
      return `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"${text}"}<|call|>`;
    case "browser":
      return `<|channel|>analysis to=browser.search code<|message|>{"query":"${text}"}<|call|>`;
    case "python":
      return `<|channel|>analysis to=python code<|message|>${text}<|call|>`;
    default:
      return `<|channel|>commentary to=repo.list <|constrain|>json<|message|>{"q":"${text}"}<|call|>`;
  }
});

/** A harmony completion: the prompt ended with `<|start|>assistant`, so the first header starts at once. */
const harmonyTokens = fc.array(harmonyMessage, { minLength: 1, maxLength: 5 })
  .map((msgs) => tok.encode(msgs.join("<|start|>assistant")));

const chatmlPiece = (kinds: string[]) =>
  fc.tuple(fc.constantFrom(...kinds), body).map(([kind, text]) => {
    switch (kind) {
      case "think":
        return `<think>\n${text}\n</think>\n\n`;
      case "text":
        return text;
      case "call":
        return `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${text}"}}\n</tool_call>`;
      default:
        return `<tool_call>\n{"name": "get_weather", "arguments": {"city": ${text}\n</tool_call>`;
    }
  });

/** ChatML outputs; `badcall` (a call whose JSON breaks) makes its raw markup legitimately visible as text. */
const chatmlTokens = (kinds: string[]) =>
  fc.tuple(fc.array(chatmlPiece(kinds), { minLength: 1, maxLength: 5 }), fc.boolean())
    .map(([pieces, end]) => tok.encode(pieces.join("") + (end ? "<|im_end|>" : "")));

/**
 * Tokens that are whole UTF-8 on their own (specials included): inserting one never makes the byte stream invalid,
 * so any U+FFFD in the output would be rill's fault, not the model's.
 */
const insertable = [...Array(tok.vocabSize).keys()].filter((id) => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(tok.tokenBytes(id));
    return true;
  } catch {
    return false;
  }
});

/** Inserts arbitrary tokens (specials included), deletes some, and may truncate: malformed model output. */
function malformed(base: fc.Arbitrary<number[]>): fc.Arbitrary<number[]> {
  const op = fc.tuple(fc.constantFrom("insert", "delete"), fc.nat(), fc.constantFrom(...insertable));
  return fc.tuple(base, fc.array(op, { minLength: 1, maxLength: 6 }), fc.option(fc.nat())).map(
    ([tokens, ops, cut]) => {
      const out = [...tokens];
      for (const [kind, at, id] of ops) {
        const i = out.length === 0 ? 0 : at % (out.length + 1);
        if (kind === "insert") out.splice(i, 0, id);
        else out.splice(i, 1);
      }
      return cut === null ? out : out.slice(0, cut % (out.length + 1));
    },
  );
}

async function runAll(
  tokens: number[],
  parser: () => OutputParser,
  finish: FinishReason,
  seed: number,
  allowMarkup = false,
): Promise<void> {
  const chunkings: Chunking[] = ["one", { seed, max: 8 }, "all"];
  let first: { response: Response; events: unknown[] } | undefined;
  for (const chunking of chunkings) {
    // Logprobs ride along on odd seeds, well-formed and malformed alike (text recovered from a broken header too),
    // so the validator checks that every output_text delta carries its tokens' logprobs under every chunking.
    const withLogprobs = seed % 2 === 1;
    const replay = withLogprobs
      ? { finish, promptTokens: 5, logprobs: fakeLogprobs(tokens, 1, tok.vocabSize) }
      : { finish, promptTokens: 5 };
    const { response, events } = await collectResponse(replayTokens(tokens, chunking, replay), {
      includeLogprobs: withLogprobs,
      template,
      tokenizer: tok,
      parser: parser(),
      ids: new CounterIds(),
      clock,
    });
    const where = `${JSON.stringify(chunking)} ${finish} ${JSON.stringify(tok.decode(tokens))}`;
    assert.deepEqual(structuralProblems(events), [], where);
    const wire: unknown[] = JSON.parse(JSON.stringify(events));
    assert.deepEqual(
      validateStream(wire, { cancelled: finish === "abort", allowMarkup, logprobs: withLogprobs }),
      [],
      where,
    );
    const plain = events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
    assert.equal(new SseEncoder().text(events), plain, "pre-rendered SSE frames must equal JSON.stringify");
    const normalized = modDeltaBoundaries(events);
    if (first === undefined) first = { response, events: normalized };
    else {
      assert.deepEqual(response, first.response, `response differs for ${JSON.stringify(chunking)}`);
      assert.deepEqual(normalized, first.events, `events differ for ${JSON.stringify(chunking)}`);
    }
  }
}

const harmony = () => new HarmonyParser(tok, { toolNames: ["get_weather"] });
const finishes = fc.constantFrom<FinishReason>("stop", "length", "error", "abort");

Deno.test("property: harmony well-formed output is chunking-invariant and well-formed", async () => {
  await fc.assert(
    fc.asyncProperty(harmonyTokens, finishes, fc.nat(), (t, f, s) => runAll(t, harmony, f, s)),
    { numRuns: RUNS },
  );
});

Deno.test("property: harmony malformed output is chunking-invariant and well-formed", async () => {
  await fc.assert(
    fc.asyncProperty(malformed(harmonyTokens), finishes, fc.nat(), (t, f, s) => runAll(t, harmony, f, s)),
    { numRuns: RUNS },
  );
});

const chatml = (startInReasoning: boolean) => () =>
  new ChatmlParser(tok, { toolNames: ["get_weather"], startInReasoning });

Deno.test("property: ChatML well-formed output is chunking-invariant and well-formed", async () => {
  await fc.assert(
    fc.asyncProperty(
      chatmlTokens(["think", "text", "call"]),
      fc.boolean(),
      finishes,
      fc.nat(),
      (t, r, f, s) => runAll(t, chatml(r), f, s),
    ),
    { numRuns: RUNS },
  );
});

Deno.test("property: ChatML malformed output is chunking-invariant and well-formed", async () => {
  await fc.assert(
    fc.asyncProperty(
      malformed(chatmlTokens(["think", "text", "call", "badcall"])),
      fc.boolean(),
      finishes,
      fc.nat(),
      (t, r, f, s) => runAll(t, chatml(r), f, s, true),
    ),
    { numRuns: RUNS },
  );
});
