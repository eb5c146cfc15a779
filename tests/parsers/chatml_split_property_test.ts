import assert from "node:assert/strict";
import fc from "fast-check";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { collectItems, runParser, summary } from "../../testing/collect_items.ts";
import { ScriptTokenizer, type SpecialSpec } from "../../testing/script_tokenizer.ts";

const MARKERS = ["<think>", "</think>", "<tool_call>", "</tool_call>"];
const utf8 = new TextEncoder();

function tokenizer(markersAreControl: boolean): ScriptTokenizer {
  const specials: SpecialSpec[] = [
    { text: "<|im_start|>", control: true },
    { text: "<|im_end|>", control: true },
    { text: "<|endoftext|>", control: true },
    ...MARKERS.map((text) => ({ text, control: markersAreControl })),
  ];
  return new ScriptTokenizer(specials);
}

const callBody = fc.oneof(
  fc.record({ name: fc.constantFrom("f", "get_weather", "unknown"), args: fc.jsonValue({ maxDepth: 2 }) }).map((
    { name, args },
  ) => `\n${JSON.stringify({ name, arguments: args })}\n`),
  fc.record({ name: fc.constantFrom("f", "g"), args: fc.object({ maxDepth: 1 }) }).map(({ name, args }) =>
    JSON.stringify({ name, arguments: JSON.stringify(args) })
  ),
  // Broken arguments after a well-formed name: the call opens, then fails somewhere in the JSON.
  fc.string({ unit: fc.constantFrom("{", "}", "[", "]", '"', ":", ",", "\\", "u", "1", " ", "é"), maxLength: 16 })
    .map((junk) => `{"name": "f", "arguments": ${junk}`),
  fc.constantFrom(
    '{"name": "f", "arguments": {"a": "😀 }"}',
    '{"name" "f"}',
    "oops",
    '{"arguments": [1,2], "name": "g"}',
  ),
);

const part = fc.oneof(
  { arbitrary: fc.string({ unit: "grapheme", maxLength: 12 }).map((s) => s.replaceAll("\uFFFD", "")), weight: 4 },
  { arbitrary: fc.constantFrom(...MARKERS, "\n", "\n\n", " ", "<", "</", "<thi", "</tool", "你好", "🚀"), weight: 4 },
  { arbitrary: callBody.map((b) => `<tool_call>${b}</tool_call>`), weight: 2 },
  { arbitrary: callBody, weight: 1 },
);

/** Tokens for `text` with markers as special tokens and the rest cut at pseudo-random byte offsets. */
function encodeWithSpecials(tok: ScriptTokenizer, text: string, seed: number): number[] {
  const ids: number[] = [];
  const pattern = new RegExp(MARKERS.map((m) => m.replace(/[/]/g, "\\/")).join("|"), "g");
  let last = 0;
  let s = seed;
  const plain = (t: string) => {
    const n = utf8.encode(t).length;
    const cuts: number[] = [];
    for (let c = 0; c < n;) {
      s = (s * 1103515245 + 12345) >>> 0;
      c += 1 + (s % 5);
      if (c < n) cuts.push(c);
    }
    ids.push(...tok.split(t, cuts));
  };
  for (const m of text.matchAll(pattern)) {
    plain(text.slice(last, m.index));
    ids.push(tok.specialId(m[0])!);
    last = m.index + m[0].length;
  }
  plain(text.slice(last));
  return ids;
}

function items(tok: ScriptTokenizer, ids: number[], tools: readonly string[], startInReasoning: boolean) {
  return collectItems(runParser(new ChatmlParser(tok, { toolNames: tools, startInReasoning }), ids));
}

Deno.test("property: items are identical however text is split into tokens (and markers as specials or text)", () => {
  fc.assert(
    fc.property(
      fc.array(part, { maxLength: 14 }),
      fc.array(fc.nat(), { maxLength: 30 }),
      fc.nat(),
      fc.boolean(),
      fc.boolean(),
      fc.constantFrom<string[]>([], ["f"], ["f", "g", "get_weather"]),
      fc.constantFrom("", "<|im_end|>"),
      (parts, rawCuts, seed, control, startInReasoning, tools, stop) => {
        const text = parts.join("");
        const tok = tokenizer(control);
        const bytes = utf8.encode(text);
        const cuts = [...new Set(rawCuts.map((c) => (bytes.length ? c % bytes.length : 0)))].sort((a, b) => a - b);
        const stopIds = stop ? [tok.specialId(stop)!] : [];
        const plain = items(tok, [...tok.split(text, cuts), ...stopIds], tools, startInReasoning);
        const bytewise = items(tok, [...bytes, ...stopIds], tools, startInReasoning);
        const special = items(tok, [...encodeWithSpecials(tok, text, seed), ...stopIds], tools, startInReasoning);
        assert.deepEqual(summary(plain), summary(bytewise));
        assert.deepEqual(summary(plain), summary(special));
        for (const it of plain) {
          assert.ok(!it.text.includes("\uFFFD"), `U+FFFD in ${JSON.stringify(it.text)}`);
          if (it.item.type === "function_call") assert.ok(tools.includes(it.item.name));
        }
      },
    ),
    { numRuns: 400 },
  );
});

Deno.test("property: well-formed calls and plain text never leak markup and lose no text", () => {
  const plainText = fc.string({ unit: "grapheme", maxLength: 10 }).filter((s) => !s.includes("<") && s.trim() === s);
  const call = fc.record({ name: fc.constantFrom("f", "g"), args: fc.object({ maxDepth: 2 }) });
  fc.assert(
    fc.property(
      fc.option(plainText, { nil: undefined }),
      fc.array(fc.oneof(plainText.filter((s) => s.length > 0).map((t) => ({ t })), call), { maxLength: 6 }),
      (thought, seq) => {
        const tok = tokenizer(false);
        let text = thought !== undefined ? `<think>\n${thought}\n</think>\n\n` : "";
        const expected: [string, string][] = thought !== undefined ? [["reasoning", thought]] : [];
        for (const p of seq) {
          if ("t" in p) {
            text += p.t;
            const last = expected.at(-1);
            if (last?.[0] === "message") last[1] += p.t;
            else expected.push(["message", p.t]);
          } else {
            const args = JSON.stringify(p.args);
            text += `\n<tool_call>\n{"name": "${p.name}", "arguments": ${args}}\n</tool_call>\n`;
            expected.push([`function_call:${p.name}`, args]);
          }
        }
        assert.deepEqual(summary(items(tok, tok.encodeOrdinary(text), ["f", "g"], false)), expected);
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("property: a token's logprob is attached once per item, in order, and every message delta has some", () => {
  fc.assert(
    fc.property(
      fc.array(part, { maxLength: 10 }),
      fc.array(fc.nat(), { maxLength: 20 }),
      fc.boolean(),
      (parts, rawCuts, startInReasoning) => {
        const text = parts.join("");
        const tok = tokenizer(false);
        const bytes = utf8.encode(text);
        const cuts = [...new Set(rawCuts.map((c) => (bytes.length ? c % bytes.length : 0)))].sort((a, b) => a - b);
        const ids = tok.split(text, cuts);
        const lps = ids.map((_, i) => ({ token: String(i), bytes: [], logprob: -1, top_logprobs: [] }));
        const parser = new ChatmlParser(tok, { toolNames: ["f"], startInReasoning });
        const segments = runParser(parser, ids, lps);
        const items = collectItems(segments);
        let open = "";
        for (const s of segments) {
          if (s.kind === "open") open = s.item.type;
          // Without this, the validator rejects the delta when logprobs are requested (invariant 54).
          if (s.kind === "delta" && open === "message") {
            assert.ok((s.logprobs?.length ?? 0) > 0, `message delta ${JSON.stringify(s.text)} has no logprobs`);
          }
        }
        // Strictly increasing, except that a token whose text spans two items ends one item and starts the next.
        let last = -1;
        for (const it of items) {
          it.logprobs.forEach((l, i) => {
            const at = Number(l.token);
            assert.ok(at > last || (i === 0 && at === last), `token ${at} after ${last}`);
            last = at;
          });
        }
        const seen = [...new Set(items.flatMap((it) => it.logprobs.map((l) => Number(l.token))))];
        if (!/[<\s]/.test(text) && text.length > 0 && !startInReasoning) assert.equal(seen.length, ids.length);
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("property: a message's logprob tokens concatenate to its text, however the text is cut into tokens", () => {
  const dec = new TextDecoder();
  fc.assert(
    fc.property(
      fc.array(part, { maxLength: 10 }),
      fc.nat(),
      fc.boolean(),
      (parts, seed, startInReasoning) => {
        const text = parts.join("");
        // Whole characters per token, so each token's `token` string is its decoded text.
        const tok = tokenizer(true);
        const ids: number[] = [];
        let s = seed;
        for (const piece of text.split(/(<think>|<\/think>|<tool_call>|<\/tool_call>)/)) {
          if (MARKERS.includes(piece)) {
            ids.push(tok.specialId(piece)!);
            continue;
          }
          const chars = [...piece];
          for (let i = 0; i < chars.length;) {
            s = (s * 1103515245 + 12345) >>> 0;
            const n = 1 + (s % 4);
            ids.push(tok.piece(chars.slice(i, i + n).join("")));
            i += n;
          }
        }
        const lps = ids.map((id) => {
          const b = tok.tokenBytes(id);
          return { token: dec.decode(b), bytes: [...b], logprob: -1, top_logprobs: [] };
        });
        const parser = new ChatmlParser(tok, { toolNames: ["f"], startInReasoning });
        for (const it of collectItems(runParser(parser, ids, lps))) {
          if (it.item.type !== "message") continue;
          assert.equal(it.logprobs.map((l) => l.token).join(""), it.text);
          assert.deepEqual(it.logprobs.flatMap((l) => l.bytes), [...utf8.encode(it.text)]);
        }
      },
    ),
    { numRuns: 300 },
  );
});
