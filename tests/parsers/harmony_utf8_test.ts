import assert from "node:assert/strict";
import fc from "fast-check";
import { HarmonyUtf8Decoder } from "../../parsers/harmony_utf8.ts";

function decodeInChunks(bytes: Uint8Array, cuts: readonly number[]): string[] {
  const decoder = new HarmonyUtf8Decoder();
  const out: string[] = [];
  let at = 0;
  for (const cut of [...cuts].sort((a, b) => a - b).concat(bytes.length)) {
    out.push(decoder.push(bytes.slice(at, Math.max(at, cut))));
    at = Math.max(at, cut);
  }
  out.push(decoder.finish());
  return out;
}

Deno.test("HarmonyUtf8Decoder equals one whole lossy decode for any byte split, valid or not", () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 40 }).chain((bytes) =>
        fc.tuple(fc.constant(bytes), fc.array(fc.integer({ min: 0, max: bytes.length }), { maxLength: 10 }))
      ),
      ([bytes, cuts]) => {
        assert.equal(decodeInChunks(bytes, cuts).join(""), new TextDecoder().decode(bytes));
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("HarmonyUtf8Decoder emits a split character whole, never U+FFFD, and as early as possible", () => {
  const bytes = new TextEncoder().encode("I 💖 it");
  // Tokens of harmony.md V19: "I", " F0 9F 92", "96", " it".
  assert.deepEqual(decodeInChunks(bytes, [1, 5, 6]), ["I", " ", "💖", " it", ""]);
});

Deno.test("HarmonyUtf8Decoder turns a dangling partial character into one U+FFFD at finish", () => {
  const decoder = new HarmonyUtf8Decoder();
  assert.equal(decoder.push(new Uint8Array([0x20, 0xf0, 0x9f])), " ");
  assert.ok(decoder.pending);
  assert.equal(decoder.finish(), "\uFFFD");
  assert.ok(!decoder.pending);
});

Deno.test("HarmonyUtf8Decoder: harmony.md §2.5 invalid sequences (token 9552 = 20 F0 9F)", () => {
  const t9552 = new Uint8Array([0x20, 0xf0, 0x9f]);
  const enc = new TextEncoder();
  const a = new HarmonyUtf8Decoder();
  assert.equal([a.push(t9552), a.push(enc.encode("Hi")), a.finish()].join(""), " \uFFFDHi");
  const b = new HarmonyUtf8Decoder();
  assert.equal(
    [b.push(t9552), b.push(enc.encode(" interesting")), b.push(enc.encode(" story")), b.finish()].join(""),
    " \uFFFD interesting story",
  );
});
