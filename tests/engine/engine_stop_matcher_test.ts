import assert from "node:assert/strict";
import fc from "fast-check";
import { StopMatcher } from "../../engine/stop_matcher.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";

const tok = new ToyTokenizer();
const bytesOf = (ids: readonly number[]) => ids.flatMap((id) => [...tok.tokenBytes(id)]);
const enc = new TextEncoder();

function indexOf(hay: readonly number[], needle: Uint8Array): number {
  outer: for (let s = 0; s + needle.length <= hay.length; s++) {
    for (let j = 0; j < needle.length; j++) if (hay[s + j] !== needle[j]) continue outer;
    return s;
  }
  return -1;
}

/** Reference: the output a stop-string-aware generator must produce, computed on the whole token list at once. */
function reference(tokens: readonly number[], stops: readonly string[], stopTokens: ReadonlySet<number>) {
  for (let k = 1; k <= tokens.length; k++) {
    if (stopTokens.has(tokens[k - 1]!)) return { out: tokens.slice(0, k), stopped: true };
    const text = bytesOf(tokens.slice(0, k));
    const starts = stops.map((s) => indexOf(text, enc.encode(s))).filter((i) => i >= 0);
    if (starts.length > 0) {
      const m = Math.min(...starts);
      let n = 0;
      while (n < k && bytesOf(tokens.slice(0, n + 1)).length <= m) n++;
      return { out: tokens.slice(0, n), stopped: true };
    }
  }
  return { out: [...tokens], stopped: false };
}

function run(tokens: readonly number[], stops: readonly string[], stopTokens: readonly number[]) {
  const m = new StopMatcher(stopTokens, stops, (id) => tok.tokenBytes(id));
  const out: number[] = [];
  for (const t of tokens) {
    const r = m.push(t);
    out.push(...r.tokens);
    if (r.kind === "stop") return { out, stopped: true };
  }
  out.push(...m.flush());
  return { out, stopped: false };
}

const END = tok.specialId("<|end|>")!;
// Letters, the partial-UTF-8 word tokens, "é"/"€" as words, a special: enough to build overlapping stop strings.
const alphabet = [
  ..."abeht !".split("").map((c) => c.charCodeAt(0)),
  ...tok.encodeOrdinary("é€the"),
  0xc3,
  0xa9,
  tok.encodeOrdinary("é")[0]!,
  tok.encode("\u00a9 ")[0]!,
  END,
];

Deno.test("stop strings: streaming output equals the whole-text reference (property)", () => {
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom(...alphabet), { maxLength: 30 }),
      fc.subarray(["ab", "the", "é!", "€", "aa", "<|end|>", "h e", "ba b"]),
      fc.boolean(),
      (tokens, stops, endIsStopToken) => {
        const stopTokens = endIsStopToken ? [END] : [];
        assert.deepEqual(run(tokens, stops, stopTokens), reference(tokens, stops, new Set(stopTokens)));
      },
    ),
    { numRuns: 400 },
  );
});

Deno.test("stop string: text before the match is released, the match and what follows are not", () => {
  const m = new StopMatcher([], ["STOP"], (id) => tok.tokenBytes(id));
  const ids = tok.encodeOrdinary("okST");
  assert.deepEqual(m.push(ids[0]!), { kind: "emit", tokens: [ids[0]] });
  assert.deepEqual(m.push(ids[1]!), { kind: "emit", tokens: [ids[1]] });
  assert.deepEqual(m.push(ids[2]!), { kind: "emit", tokens: [] }, "'S' may start STOP: held");
  assert.deepEqual(m.push(ids[3]!), { kind: "emit", tokens: [] });
  const [o, p] = tok.encodeOrdinary("OP");
  assert.deepEqual(m.push(o!), { kind: "emit", tokens: [] });
  assert.deepEqual(m.push(p!), { kind: "stop", tokens: [] });
});

Deno.test("stop string: a false start is released once it cannot match", () => {
  const m = new StopMatcher([], ["STOP"], (id) => tok.tokenBytes(id));
  const [s, t, x] = tok.encodeOrdinary("STx");
  m.push(s!);
  m.push(t!);
  assert.deepEqual(m.push(x!), { kind: "emit", tokens: [s, t, x] });
});

Deno.test("stop token is reported with the held tokens before it", () => {
  const m = new StopMatcher([END], ["xyz"], (id) => tok.tokenBytes(id));
  const [x] = tok.encodeOrdinary("x");
  assert.deepEqual(m.push(x!), { kind: "emit", tokens: [] });
  assert.deepEqual(m.push(END), { kind: "stop", tokens: [x, END] });
});

Deno.test("multi-byte stop string split across tokens matches on bytes", () => {
  const m = new StopMatcher([], ["é"], (id) => tok.tokenBytes(id));
  assert.deepEqual(m.push(0x61), { kind: "emit", tokens: [0x61] });
  assert.deepEqual(m.push(0xc3), { kind: "emit", tokens: [] });
  assert.deepEqual(m.push(0xa9), { kind: "stop", tokens: [] });
});
