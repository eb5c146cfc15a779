import assert from "node:assert/strict";
import fc from "fast-check";
import { HarmonyParser } from "../../parsers/harmony_parser.ts";
import type { Segment } from "../../parsers/segment.ts";
import { o200kTokenizer } from "../../testing/o200k_tokenizer.ts";
import { runParser } from "../../testing/collect_items.ts";

const tok = o200kTokenizer();
const special = (text: string): number => {
  const id = tok.specialId(text);
  if (id === undefined) throw new Error(`missing special ${text}`);
  return id;
};

const SPECIALS = [
  "<|start|>",
  "<|end|>",
  "<|message|>",
  "<|channel|>",
  "<|constrain|>",
  "<|return|>",
  "<|call|>",
  "<|endoftext|>",
  "<|reserved_200013|>",
].map(special);

/** Header words, plain words and tokens that split UTF-8 characters (74580 = 20 F0 9F 92, 244 = 96, 9552 = 20 F0 9F). */
const TEXT = [
  ...["assistant", "analysis", "final", "commentary", " to", "=", "functions", ".get", "_weather", "json", " code"],
  ...["Hi", ".", " world", '{"', "location", '":"', "Paris", '"}', " ", "python", "browser", ".search"],
].flatMap((t) => tok.encodeOrdinary(t)).concat([74580, 244, 9552, 31446]);

const tokenArb = fc.oneof(
  { weight: 1, arbitrary: fc.constantFrom(...SPECIALS) },
  { weight: 3, arbitrary: fc.constantFrom(...TEXT) },
);

/** A well-formed-ish harmony message, so scripts also reach deep states, not only noise. */
const messageArb = fc.tuple(
  fc.constantFrom(
    "<|channel|>analysis",
    "<|channel|>final",
    "<|channel|>commentary",
    "<|channel|>commentary to=functions.get_weather <|constrain|>json",
    " to=functions.get_weather<|channel|>commentary json",
    "<|channel|>analysis to=python code",
  ),
  fc.array(fc.constantFrom(...TEXT), { maxLength: 6 }),
  fc.constantFrom("<|end|>", "<|call|>", "<|return|>", ""),
).map(([header, body, end]) => [...tok.encode(`<|start|>assistant${header}<|message|>`), ...body, ...tok.encode(end)]);

const scriptArb = fc.array(fc.oneof(fc.array(tokenArb, { maxLength: 8 }), messageArb), { maxLength: 8 }).map((
  parts,
) => parts.flat());

function run(tokens: readonly number[]): Segment[] {
  return runParser(new HarmonyParser(tok, { toolNames: ["get_weather"] }), tokens);
}

/** Runs of text tokens right after a `<|message|>`: the parser must show each of them, decoded on its own. */
function contentRuns(tokens: readonly number[]): string[] {
  const runs: string[] = [];
  const message = special("<|message|>");
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i] !== message) continue;
    let j = i + 1;
    while (j < tokens.length && !tok.isSpecial(tokens[j]!)) j++;
    if (j > i + 1) runs.push(tok.decode(tokens.slice(i + 1, j)));
  }
  return runs;
}

Deno.test("HarmonyParser property: random scripts never throw, every open is closed, no content text is lost", () => {
  fc.assert(
    fc.property(scriptArb, (tokens) => {
      const segments = run(tokens);
      let open = false;
      let text = "";
      for (const s of segments) {
        if (s.kind === "open") {
          assert.ok(!open, "open while an item is open");
          open = true;
        } else if (s.kind === "close") {
          assert.ok(open, "close without open");
          open = false;
          text += "\n";
        } else {
          assert.ok(open, "delta outside an item");
          assert.ok(s.text.length > 0, "empty delta");
          assert.ok(!/<\|[a-z_0-9]+\|>/.test(s.text), "control token leaked into text");
          text += s.text;
        }
      }
      assert.ok(!open, "item left open after flush");
      for (const run of contentRuns(tokens)) assert.ok(text.includes(run), `lost content ${JSON.stringify(run)}`);
    }),
    { numRuns: 400 },
  );
});

Deno.test("HarmonyParser property: a split character never yields U+FFFD when its bytes are all present", () => {
  fc.assert(
    fc.property(fc.array(fc.constantFrom("a", "é", "💖", "中文", " ", "€"), { maxLength: 20 }), (chars) => {
      const body = chars.join("");
      // Byte tokens from the byte-level part of the vocabulary force every multi-byte character to split.
      const byteTokens = [...new TextEncoder().encode(body)].map(byteToken);
      const segments = run([...tok.encode("<|channel|>final<|message|>"), ...byteTokens, special("<|return|>")]);
      const out = segments.flatMap((s) => s.kind === "delta" ? [s.text] : []).join("");
      assert.equal(out, body);
    }),
    { numRuns: 200 },
  );
});

const byteTokenCache = new Map<number, number>();
/** The id whose bytes are exactly the one byte `b` (o200k has one per byte value). */
function byteToken(b: number): number {
  if (byteTokenCache.size === 0) {
    for (let id = 0; id < 200000 && byteTokenCache.size < 256; id++) {
      const bytes = tok.tokenBytes(id);
      if (bytes.length === 1 && !byteTokenCache.has(bytes[0]!)) byteTokenCache.set(bytes[0]!, id);
    }
  }
  const id = byteTokenCache.get(b);
  if (id === undefined) throw new Error(`no single-byte token for ${b}`);
  return id;
}

Deno.test("HarmonyParser property: every text delta carries logprobs of text tokens, each token once, in order", () => {
  fc.assert(
    fc.property(scriptArb, (tokens) => {
      // The logprob's `token` field is the token's position, so attribution can be traced back.
      const parser = new HarmonyParser(tok, { toolNames: ["get_weather"] });
      const segments: Segment[] = [];
      tokens.forEach((t, i) =>
        segments.push(...parser.push(t, { token: String(i), bytes: [], logprob: -1, top_logprobs: [] }))
      );
      segments.push(...parser.flush());
      let last = -1;
      for (const s of segments) {
        if (s.kind !== "delta") continue;
        const positions = (s.logprobs ?? []).map((l) => Number(l.token));
        assert.ok(positions.length > 0, `delta ${JSON.stringify(s.text)} carries no logprobs`);
        for (const p of positions) {
          assert.ok(p > last, `token ${p} attached twice or out of order`);
          assert.ok(!tok.isSpecial(tokens[p]!), `control token ${tokens[p]} attached to ${JSON.stringify(s.text)}`);
          last = p;
        }
      }
    }),
    { numRuns: 400 },
  );
});
