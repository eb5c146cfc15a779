/**
 * Stop strings end the visible text exactly where they begin, also when they begin inside a token: the matcher
 * replaces that token by the ordinary encoding of its text before the stop string, when that text is exactly
 * representable (whole UTF-8 characters, nothing incomplete before it); otherwise the token is dropped whole.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import type { EngineChunk, SamplingParams, TokenLogprob } from "../../engine/engine.ts";
import { openEngine } from "../../engine/open_engine.ts";
import { loadModel } from "../../prompt/load_model.ts";
import { StopMatcher } from "../../engine/stop_matcher.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * A byte-level test vocabulary: ids 0..255 are single bytes, then multi-byte words, some holding whole multi-byte
 * characters and some splitting one. Greedy longest-match encoding, so any text round-trips byte for byte.
 */
const WORDS = ["café!", " =", "= 19", "é=", "ab", "éé", "12 + 7"].map((w) => enc.encode(w));
const SPLIT_WORDS = [new Uint8Array([0xa9, 0x3d]), new Uint8Array([0x61, 0xc3])]; // tail of "é" + "=", "a" + head of "é"
const VOCAB: Uint8Array[] = [...Array.from({ length: 256 }, (_, b) => new Uint8Array([b])), ...WORDS, ...SPLIT_WORDS];
const BY_LENGTH = VOCAB.map((bytes, id) => ({ id, bytes })).filter((w) => w.bytes.length > 1)
  .sort((a, b) => b.bytes.length - a.bytes.length);
const tokenBytes = (id: number) => VOCAB[id]!;
const wordId = (w: string) => VOCAB.findIndex((v, id) => id >= 256 && dec.decode(v) === w);

function encodeOrdinary(text: string): number[] {
  const bytes = enc.encode(text);
  const out: number[] = [];
  let i = 0;
  outer: while (i < bytes.length) {
    for (const { id, bytes: w } of BY_LENGTH) {
      if (i + w.length <= bytes.length && w.every((b, j) => bytes[i + j] === b)) {
        out.push(id);
        i += w.length;
        continue outer;
      }
    }
    out.push(bytes[i++]!);
  }
  return out;
}

const bytesOf = (ids: readonly number[]) => ids.flatMap((id) => [...tokenBytes(id)]);

function run(tokens: readonly number[], stops: readonly string[]) {
  const m = new StopMatcher([], stops, tokenBytes, encodeOrdinary);
  const out: number[] = [];
  for (const t of tokens) {
    const r = m.push(t);
    out.push(...r.tokens);
    if (r.kind === "stop") return { out, stopped: true, synthesized: r.synthesized ?? 0 };
  }
  out.push(...m.flush());
  return { out, stopped: false, synthesized: 0 };
}

function indexOf(hay: readonly number[], needle: Uint8Array, from = 0): number {
  outer: for (let s = from; s + needle.length <= hay.length; s++) {
    for (let j = 0; j < needle.length; j++) if (hay[s + j] !== needle[j]) continue outer;
    return s;
  }
  return -1;
}

const validUtf8 = (bytes: readonly number[]) => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
    return true;
  } catch {
    return false;
  }
};

Deno.test("stop string inside a token: the text before it is kept, re-encoded", () => {
  const cafe = wordId("café!");
  const r = run([0x41, cafe, 0x42], ["!"]);
  assert.equal(r.stopped, true);
  assert.equal(dec.decode(new Uint8Array(bytesOf(r.out))), "Acafé");
  assert.deepEqual(r.out, [0x41, ...encodeOrdinary("café")]);
  assert.equal(r.synthesized, encodeOrdinary("café").length);
});

Deno.test("stop string right after an 'é' inside a token keeps the 'é'", () => {
  const r = run([0x78, wordId("é="), 0x31], ["="]);
  assert.equal(dec.decode(new Uint8Array(bytesOf(r.out))), "xé");
  assert.deepEqual(r.out, [0x78, 0xc3, 0xa9]);
  assert.equal(r.synthesized, 2);
});

Deno.test("the QA case: ' =' is one token, the space before '= 19' survives", () => {
  const r = run(encodeOrdinary("12 + 7").concat([wordId(" ="), 0x20, 0x31, 0x39]), ["= 19"]);
  assert.equal(dec.decode(new Uint8Array(bytesOf(r.out))), "12 + 7 ");
});

Deno.test("stop string at a token boundary: unchanged, nothing synthesized", () => {
  const r = run([0x61, 0x62, wordId("= 19"), 0x21], ["= 19"]);
  assert.deepEqual(r, { out: [0x61, 0x62], stopped: true, synthesized: 0 });
});

Deno.test("prefix not representable on its own (continues a character from earlier): the token is dropped", () => {
  // "x" C3 | A9 "=" : the stop "=" starts inside the second token, whose text before it is half of "é".
  const r = run([0x78, 0xc3, SPLIT_ID_TAIL, 0x31], ["="]);
  assert.deepEqual(r, { out: [0x78, 0xc3], stopped: true, synthesized: 0 });
});

const SPLIT_ID_TAIL = 256 + WORDS.length;

Deno.test("without encodeOrdinary the matcher keeps dropping the token in which the stop string starts", () => {
  const m = new StopMatcher([], ["!"], tokenBytes);
  assert.deepEqual(m.push(wordId("café!")), { kind: "stop", tokens: [] });
});

Deno.test("stop strings: emitted bytes end exactly at the match when representable (property)", () => {
  const alphabet = [
    0x61,
    0x3d,
    0x20,
    0x21,
    0xc3,
    0xa9,
    ...Array.from({ length: VOCAB.length - 256 }, (_, i) => 256 + i),
  ];
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom(...alphabet), { maxLength: 24 }),
      fc.subarray(["=", "!", "a=", "é", "= 1", " a", "éa"], { minLength: 1 }),
      (tokens, stops) => {
        const r = run(tokens, stops);
        // Reference on the whole token list: the first prefix of tokens whose bytes contain a stop string.
        for (let k = 1; k <= tokens.length; k++) {
          const all = bytesOf(tokens.slice(0, k));
          const starts = stops.map((s) => indexOf(all, enc.encode(s))).filter((i) => i >= 0);
          if (starts.length === 0) continue;
          const match = Math.min(...starts);
          let n = 0;
          while (bytesOf(tokens.slice(0, n + 1)).length <= match) n++;
          const tStart = bytesOf(tokens.slice(0, n)).length;
          const head = all.slice(0, tStart);
          const prefix = all.slice(tStart, match);
          // T starts at a character boundary iff a streaming decoder holds nothing back after the bytes before it.
          const streaming = new TextDecoder();
          streaming.decode(new Uint8Array(head), { stream: true });
          const boundary = streaming.decode() === "";
          const exact = prefix.length > 0 && boundary && validUtf8(prefix);
          assert.equal(r.stopped, true);
          assert.deepEqual(bytesOf(r.out), exact ? all.slice(0, match) : head);
          assert.deepEqual(r.out.slice(0, n), tokens.slice(0, n));
          return;
        }
        assert.deepEqual(r, { out: tokens, stopped: false, synthesized: 0 });
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("a re-encoding that changes the bytes (e.g. a normalizer adding a space) is refused: the token is dropped", () => {
  const m = new StopMatcher([], ["!"], tokenBytes, (text) => encodeOrdinary(` ${text}`));
  assert.deepEqual(m.push(wordId("café!")), { kind: "stop", tokens: [] });
});

async function generation(stream: ReadableStream<EngineChunk>) {
  const tokens: number[] = [];
  const logprobs: TokenLogprob[] = [];
  let finish: Extract<EngineChunk, { type: "finish" }> | undefined;
  for await (const c of stream) {
    if (c.type === "step") {
      tokens.push(...c.tokens);
      logprobs.push(...(c.logprobs ?? []));
    } else finish = c;
  }
  assert.ok(finish !== undefined);
  return { tokens, logprobs, finish };
}

Deno.test("engine on rill-tiny-chatml: '= 19' starting inside ' =' leaves the text ending in '12 + 7 ', logprobs aligned", async () => {
  const model = await loadModel(new URL("../../models/rill-tiny-chatml", import.meta.url).pathname);
  // No prefix cache: the two runs below must compute bit-identical logprobs, and a cached prefix sends the second
  // run's prompt tail through different kernels (same tokens, last-bit differences in the logprobs).
  const engine = await openEngine({
    modelDir: model.dir,
    tokenizer: model.tokenizer,
    eosTokenIds: model.eosTokenIds,
    backend: { prefixCache: false },
  });
  try {
    const tk = model.tokenizer;
    const promptTokens = model.format.render({
      messages: [{ role: "user", content: "What is 12 + 7?" }],
      tools: [],
      toolChoice: "auto",
    });
    const sampling: SamplingParams = {
      temperature: 0,
      topP: 1,
      topK: 0,
      maxTokens: 48,
      stopTokens: model.format.stopTokens,
      stopStrings: [],
      logprobs: 2,
    };
    const full = await generation(engine.generate({ id: "full", promptTokens, sampling }));
    const fullText = tk.decode(full.tokens);
    const at = fullText.indexOf("= 19");
    assert.ok(at > 0, `unstopped output contains "= 19": ${JSON.stringify(fullText)}`);
    const t = full.tokens.findIndex((_, i) => tk.decode(full.tokens.slice(0, i + 1)).length > at);
    assert.ok(tk.decode([full.tokens[t]!]).length > 1, "the stop string starts inside a token (the case under test)");

    const stopped = await generation(
      engine.generate({ id: "stopped", promptTokens, sampling: { ...sampling, stopStrings: ["= 19"] } }),
    );
    assert.equal(stopped.finish.reason, "stop");
    assert.equal(tk.decode(stopped.tokens), fullText.slice(0, at));
    assert.ok(tk.decode(stopped.tokens).endsWith("12 + 7 "));
    assert.equal(stopped.logprobs.length, stopped.tokens.length, "one logprob entry per emitted token");
    // Generated tokens before T keep their own entries; the first synthesized token carries T's entry.
    assert.deepEqual(stopped.logprobs.slice(0, t), full.logprobs.slice(0, t));
    assert.deepEqual(stopped.logprobs[t], full.logprobs[t]);
    for (const lp of stopped.logprobs.slice(t + 1)) {
      assert.deepEqual(lp, { logprob: full.logprobs[t]!.logprob, top: [] });
    }
    // Usage counts what the model generated: through the token that completes the stop string.
    const last = full.tokens.findIndex((_, i) => tk.decode(full.tokens.slice(0, i + 1)).includes("= 19"));
    assert.equal(stopped.finish.outputTokens, last + 1);
  } finally {
    await engine.close();
  }
});
