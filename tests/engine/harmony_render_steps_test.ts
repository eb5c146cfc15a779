/**
 * The harmony format's `renderSteps` yields exactly `render`'s tokens, and `render` still matches encoding each text
 * piece whole: long text is cut only where the o200k pre-tokenizer starts a new pre-token anyway.
 */
import assert from "node:assert/strict";
import { createHarmonyFormat } from "../../prompt/harmony_format.ts";
import { HfTokenizer } from "../../checkpoint/hf_tokenizer.ts";
import type { PromptInput } from "../../prompt/conversation.ts";
import { O200kTokenizer } from "../../testing/o200k_tokenizer.ts";

/** Deterministic long text mixing words, numbers, punctuation, runs of spaces, newlines and non-ASCII. */
function mixedText(chars: number, seed: number): string {
  const words = ["alpha", "Beta", "γάμμα", "1234567", "über", "x", "'s", "—", "!!", "a.b", "日本語", "e\u0301", "$5"];
  const gaps = [" ", " ", " ", "  ", "\n", " \n", "\t", ", ", ". "];
  let s = seed;
  const next = () => (s = (s * 1103515245 + 12345) % 2 ** 31);
  let text = "";
  while (text.length < chars) text += words[next() % words.length]! + gaps[next() % gaps.length]!;
  return text;
}

for (
  const [name, tokenizer] of [
    ["o200k", () => new O200kTokenizer()],
    ["rill-tiny-harmony tokenizer.json", () => HfTokenizer.fromFile("models/rill-tiny-harmony/tokenizer.json")],
  ] as const
) {
  Deno.test(`harmony renderSteps (${name}): exactly render's tokens, and the whole-piece encoding`, async () => {
    const tok = await tokenizer();
    const format = createHarmonyFormat(tok, { date: "2026-01-01" });
    for (const seed of [1, 2, 3]) {
      const text = mixedText(40_000, seed);
      const input: PromptInput = { messages: [{ role: "user", content: text }], tools: [], toolChoice: "auto" };
      const rendered = format.render(input);
      const stepped = [...format.renderSteps!(input)].flat();
      assert.deepEqual(stepped, rendered);
      // The user text's tokens inside the prompt equal encoding the text in one call.
      const whole = tok.encodeOrdinary(text);
      const at = rendered.findIndex((_, i) => whole.every((id, j) => rendered[i + j] === id));
      assert.ok(at > 0, `seed ${seed}: the whole-text encoding is not in the rendered prompt`);
    }
  });
}
