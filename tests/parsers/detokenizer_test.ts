import assert from "node:assert/strict";
import fc from "fast-check";
import { IncrementalDetokenizer, Utf8StreamDecoder } from "../../parsers/detokenizer.ts";
import { ScriptTokenizer, SentencePieceTokenizer } from "../../testing/script_tokenizer.ts";

const utf8 = new TextEncoder();

function run(tok: ScriptTokenizer | SentencePieceTokenizer, ids: readonly number[]): string[] {
  const d = new IncrementalDetokenizer(tok);
  const out = ids.map((id) => d.push(id));
  out.push(d.flush());
  return out;
}

Deno.test("an emoji split byte by byte appears whole with the token that completes it", () => {
  const tok = new ScriptTokenizer([]);
  const ids = tok.split("a😀b", [1, 2, 3, 4, 5]); // a | F0 | 9F | 98 | 80 | b
  assert.deepEqual(run(tok, ids), ["a", "", "", "", "😀", "b", ""]);
});

Deno.test("CJK split across multi-byte tokens never yields U+FFFD", () => {
  const tok = new ScriptTokenizer([]);
  const text = "你好，世界";
  const ids = tok.split(text, [2, 4, 7, 8, 13]);
  const out = run(tok, ids);
  assert.equal(out.join(""), text);
  assert.ok(out.every((s) => !s.includes("\uFFFD")));
  assert.deepEqual(out, ["", "你", "好", "", "，世", "界", ""]);
});

Deno.test("a truncated character becomes one U+FFFD at flush, and the detokenizer is reusable", () => {
  const tok = new ScriptTokenizer([]);
  const d = new IncrementalDetokenizer(tok);
  assert.equal(d.push(tok.piece("x")), "x");
  assert.equal(d.push(0xe4), "");
  assert.equal(d.push(0xbd), "");
  assert.equal(d.flush(), "\uFFFD");
  assert.equal(d.push(tok.piece("ok")), "ok");
  assert.equal(d.flush(), "");
});

Deno.test("invalid bytes become U+FFFD as soon as they are proven invalid", () => {
  const tok = new ScriptTokenizer([]);
  const d = new IncrementalDetokenizer(tok);
  assert.equal(d.push(0xe4), "");
  // "A" cannot continue E4: the pending byte is replaced, then "A" decodes.
  assert.equal(d.push(0x41), "\uFFFDA");
  assert.equal(d.push(0xff), "\uFFFD");
  assert.equal(d.push(0x80), "\uFFFD");
});

Deno.test("a token used both clean and mid-character decodes correctly in each position", () => {
  const tok = new ScriptTokenizer([]);
  // Token "\x80A" is invalid from a clean state but completes "ࠀ"-style sequences when pending.
  const tail = tok.piece(Uint8Array.of(0x80, 0x41));
  const d = new IncrementalDetokenizer(tok);
  assert.equal(d.push(tail), "\uFFFDA");
  assert.equal(d.push(0xc2), "");
  assert.equal(d.push(tail), "\u0080A");
  assert.equal(d.push(tail), "\uFFFDA");
});

Deno.test("SentencePiece-style vocabulary: ▁ pieces and <0xNN> byte-fallback pieces", () => {
  const bytePieces = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
  const tok = new SentencePieceTokenizer([
    "<unk>",
    "<s>",
    "</s>",
    ...bytePieces,
    "\u2581",
    "\u2581Hello",
    "\u2581world",
    "!",
  ]);
  const ids = tok.encodeOrdinary(" Hello world 🚀!");
  // 🚀 has no piece: it must arrive as four byte-fallback tokens.
  assert.deepEqual(ids.slice(3, 7).map((id) => tok.tokenBytes(id).length), [1, 1, 1, 1]);
  const out = run(tok, ids);
  assert.equal(out.join(""), " Hello world 🚀!");
  assert.deepEqual(out, [" Hello", " world", " ", "", "", "", "🚀", "!", ""]);
});

Deno.test("property: any split of any byte sequence decodes like TextDecoder", () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ unit: "grapheme", maxLength: 40 }).map((s) => utf8.encode(s)),
        fc.uint8Array({ maxLength: 40 }),
      ),
      fc.array(fc.nat(), { maxLength: 12 }),
      (bytes, rawCuts) => {
        const tok = new ScriptTokenizer([]);
        const cuts = [...new Set(rawCuts.map((c) => (bytes.length > 0 ? c % bytes.length : 0)))].sort((a, b) => a - b);
        const ids: number[] = [];
        let start = 0;
        for (const c of [...cuts, bytes.length]) {
          if (c > start) {
            ids.push(tok.piece(bytes.subarray(start, c)));
            start = c;
          }
        }
        assert.equal(run(tok, ids).join(""), new TextDecoder().decode(bytes));
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("Utf8StreamDecoder decodes long ASCII runs", () => {
  const d = new Utf8StreamDecoder();
  const long = "x".repeat(20000);
  assert.equal(d.decode(utf8.encode(long)), long);
  assert.ok(d.clean);
});

Deno.test("Utf8StreamDecoder: harmony.md §2.5 vectors (token 9552 = 20 F0 9F, V19 split emoji)", () => {
  const t9552 = Uint8Array.of(0x20, 0xf0, 0x9f);
  const decodeAll = (chunks: readonly Uint8Array[]): string[] => {
    const d = new Utf8StreamDecoder();
    return [...chunks.map((c) => d.decode(c)), d.flush()];
  };
  assert.equal(decodeAll([t9552, utf8.encode("Hi")]).join(""), " \uFFFDHi");
  assert.equal(
    decodeAll([t9552, utf8.encode(" interesting"), utf8.encode(" story")]).join(""),
    " \uFFFD interesting story",
  );
  assert.equal(decodeAll([t9552, t9552, utf8.encode("worked")]).join(""), " \uFFFD \uFFFDworked");
  // "I 💖 it" as V19's tokens: the emoji appears whole with the token that completes it, never as U+FFFD.
  const bytes = utf8.encode("I 💖 it");
  assert.deepEqual(decodeAll([bytes.subarray(0, 1), bytes.subarray(1, 5), bytes.subarray(5, 6), bytes.subarray(6)]), [
    "I",
    " ",
    "💖",
    " it",
    "",
  ]);
});

Deno.test("an id the tokenizer cannot map decodes as U+FFFD instead of throwing", () => {
  const tok = new ScriptTokenizer([]);
  const ids = [...tok.split("ab", [1])];
  assert.deepEqual(run(tok, [ids[0]!, 999_999, ids[1]!]).join(""), "a\uFFFDb");
});
